"""Where device time goes, on any device: a small profiler built on the launch hooks.

    with anytile.profiler.profile() as prof:
        run_my_model()
    print(prof.table())                    # per kernel: launches, total and mean device time
    prof.chrome_trace("trace.json")        # open in chrome://tracing or Perfetto

Each launch is timed with its device's ``Backend.timer`` (CUDA events on NVIDIA, the host
clock around a synchronize elsewhere), which waits for the launch: profiling serialises the
work it measures."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Optional

from .runtime.hooks import LaunchInfo, knobs

__all__ = ["Profile", "profile", "LaunchRecord"]


@dataclass(frozen=True)
class LaunchRecord:
    """One timed launch."""

    name: str
    device: str
    grid: tuple[int, int, int]
    started_us: float            # host clock at the launch, microseconds since the profile began
    device_ms: float


class Profile:
    """The launches made while it is active (a context manager; see the module docstring)."""

    def __init__(self) -> None:
        self.records: list[LaunchRecord] = []
        self._open: dict[int, tuple[Any, float]] = {}
        self._saved: Optional[tuple] = None
        self._began = 0.0

    def __enter__(self) -> "Profile":
        runtime = knobs.runtime
        self._saved = (runtime.launch_enter_hook, runtime.launch_exit_hook)
        self._began = time.perf_counter()
        previous_enter, previous_exit = self._saved

        def enter(info: LaunchInfo) -> None:
            if previous_enter is not None:
                previous_enter(info)
            timer = info.device.backend.timer(info.device.info)
            self._open[id(info)] = (timer, (time.perf_counter() - self._began) * 1e6)
            timer.start()

        def leave(info: LaunchInfo) -> None:
            timer, started = self._open.pop(id(info))
            timer.stop()
            self.records.append(LaunchRecord(info.name, info.device.name, info.grid, started,
                                             timer.elapsed_ms()))
            if previous_exit is not None:
                previous_exit(info)
        runtime.launch_enter_hook, runtime.launch_exit_hook = enter, leave
        return self

    def __exit__(self, *exc: Any) -> None:
        knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook = self._saved

    def summary(self) -> list[dict[str, Any]]:
        """Per kernel and device: launches, total and mean device time (ms), most time first."""
        groups: dict[tuple[str, str], list[float]] = {}
        for r in self.records:
            groups.setdefault((r.name, r.device), []).append(r.device_ms)
        rows = [{"kernel": name, "device": device, "launches": len(times),
                 "total_ms": sum(times), "mean_ms": sum(times) / len(times)}
                for (name, device), times in groups.items()]
        return sorted(rows, key=lambda row: -row["total_ms"])

    def table(self) -> str:
        """The summary as a text table."""
        rows = self.summary()
        header = f"{'kernel':<32} {'device':<14} {'launches':>8} {'total ms':>12} {'mean ms':>12}"
        lines = [header, "-" * len(header)]
        lines += [f"{r['kernel']:<32} {r['device']:<14} {r['launches']:>8} {r['total_ms']:>12.4f} "
                  f"{r['mean_ms']:>12.4f}" for r in rows]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The summary and every launch, as JSON-ready data."""
        return {"summary": self.summary(),
                "launches": [{"kernel": r.name, "device": r.device, "grid": list(r.grid),
                              "started_us": r.started_us, "device_ms": r.device_ms}
                             for r in self.records]}

    def chrome_trace(self, path: str) -> None:
        """Write the launches as a Chrome trace (one row per device)."""
        events = [{"name": r.name, "ph": "X", "ts": r.started_us, "dur": r.device_ms * 1e3,
                   "pid": r.device, "tid": 0, "args": {"grid": list(r.grid)}}
                  for r in self.records]
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


def profile() -> Profile:
    """A new ``Profile`` (use it as ``with profile() as prof:``)."""
    return Profile()
