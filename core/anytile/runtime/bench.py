"""Timing kernels on any device: ``do_bench`` (``anytile.testing.do_bench``, the autotuner).

Like Triton's: a first run finds the device the function launches on, five runs estimate its
time, then ``warmup`` ms of runs are discarded and ``rep`` ms of runs are timed one by one with
the device's ``Backend.timer`` (CUDA events on NVIDIA; the host clock around a synchronize on
host devices).  On GPUs a 256 MB buffer is rewritten before each timed run so that no run finds
its inputs in the L2 cache left by the one before."""
from __future__ import annotations

import statistics
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ._bench_kernels import fill_int32
from .arrays import zeros
from .devices import default_device, device as get_device
from .hooks import knobs

__all__ = ["do_bench"]

_FLUSH_BYTES = 256 << 20
_flush_buffers: dict[str, Any] = {}


def _devices_launched_on(fn: Callable[[], Any]) -> list:
    """Run ``fn`` once and return the devices of the anytile launches it made, in order."""
    seen: list = []
    previous = knobs.runtime.launch_exit_hook

    def record(info: Any) -> None:
        if info.device not in seen:
            seen.append(info.device)
        if previous is not None:
            previous(info)
    knobs.runtime.launch_exit_hook = record
    try:
        fn()
    finally:
        knobs.runtime.launch_exit_hook = previous
    return seen


def _flusher(device: Any) -> Callable[[], None]:
    """A function rewriting a buffer larger than the device's last-level cache (none on host
    devices: their timer already waits for the work, and a host cache flush costs more than
    most kernels)."""
    if device.backend.host_memory:
        return lambda: None
    buffer = _flush_buffers.get(device.name)
    if buffer is None:
        buffer = _flush_buffers[device.name] = zeros(_FLUSH_BYTES // 4, np.int32, device=device)
    n = buffer.size
    return lambda: fill_int32[((n + 4095) // 4096,)](buffer, n, 1, BLOCK=4096)


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100,
             grad_to_none: Optional[Sequence[Any]] = None,
             quantiles: Optional[Sequence[float]] = None, return_mode: str = "mean",
             device: Any = None) -> Any:
    """The time of one call of ``fn`` in milliseconds (see the module docstring).
    ``return_mode``: "mean", "median", "min", "max" or "all" (the list of times);
    ``quantiles``: a list of the times at those quantiles instead.  ``grad_to_none``: objects
    whose ``.grad`` is reset to ``None`` before each run (torch tensors).  ``device``: where
    to time (default: the device of the first anytile launch ``fn`` makes, else the default
    device)."""
    if return_mode not in ("mean", "median", "min", "max", "all"):
        raise ValueError(f"return_mode must be mean, median, min, max or all, got {return_mode!r}")
    if device is None:
        used = _devices_launched_on(fn)
        dev = used[0] if used else default_device()
    else:
        dev = get_device(device)
        fn()
    flush = _flusher(dev)
    backend, info = dev.backend, dev.info
    timer = backend.timer(info)
    timer.start()
    for _ in range(5):
        flush()
        fn()
    timer.stop()
    estimate = max(timer.elapsed_ms() / 5, 1e-4)
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    times = []
    timers = [backend.timer(info) for _ in range(max(1, int(rep / estimate)))]
    for t in timers:
        for tensor in grad_to_none or ():
            tensor.grad = None
        flush()
        t.start()
        fn()
        t.stop()
    times = [t.elapsed_ms() for t in timers]
    if quantiles is not None:
        ranked = np.quantile(np.asarray(times), list(quantiles)).tolist()
        return ranked[0] if len(ranked) == 1 else ranked
    if return_mode == "all":
        return times
    return {"mean": statistics.fmean, "median": statistics.median, "min": min,
            "max": max}[return_mode](times)
