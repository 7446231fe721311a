"""``tl.extra.hip``: Triton's ROCm device-library namespace, served by the same portable
``libdevice`` as every backend (``from triton.language.extra.hip import libdevice``)."""
from .. import libdevice  # noqa: F401

__all__ = ["libdevice"]
