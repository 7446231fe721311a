"""``tl.extra``: the device-library namespaces Triton kernels import functions from
(``from triton.language.extra import libdevice``, ``tl.extra.cuda.libdevice.tanh``).  anytile
serves them from one portable ``libdevice`` module for every backend."""
from . import cuda, hip, libdevice  # noqa: F401

__all__ = ["cuda", "hip", "libdevice"]
