"""``tl.extra.cuda``: the same portable functions as ``tl.extra.libdevice``, and the
programmatic-dependent-launch calls of Triton's CUDA extras.

``gdc_wait()`` and ``gdc_launch_dependents()`` order a kernel against the one launched before
it when both were launched with ``launch_pdl=True`` on Hopper.  anytile launches kernels one
after the other on a stream (``launch_pdl`` is accepted and not used), so the previous
kernel has always finished and both calls have nothing to do: they compile to nothing, on
every device, and the kernel's results are the same."""
from typing import Any

from .. import libdevice  # noqa: F401
from ...objects import builtin

__all__ = ["libdevice", "gdc_wait", "gdc_launch_dependents"]


@builtin
def gdc_wait(_builder: Any = None) -> None:
    """Wait for the kernel this one depends on (already finished here: no code)."""


@builtin
def gdc_launch_dependents(_builder: Any = None) -> None:
    """Let dependent kernels start (they start after this one here: no code)."""
