"""Running cases on one device: capability skips, per-case isolation and timing.

Every case either passes, fails (its output does not conform, or the backend raised: a crash
is a failure) or is skipped because the backend does not declare a capability it needs.
There is no other way to skip a case."""
from __future__ import annotations

import platform
import signal
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import __version__
from .case import AREAS, Case, CaseContext, CaseFailure

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass
class CaseResult:
    """The outcome of one case."""

    case_id: str
    area: str
    status: str
    message: str = ""
    seconds: float = 0.0


@dataclass
class SuiteRun:
    """Everything a report needs: who was tested, how, and every case's outcome."""

    header: dict[str, Any]
    results: list[CaseResult] = field(default_factory=list)
    #: why the run did not finish, as its verdict ("INTERRUPTED: ..."); "" when it finished
    unfinished: str = ""

    @property
    def failures(self) -> list[CaseResult]:
        return [r for r in self.results if r.status == FAILED]

    @property
    def conformant(self) -> bool:
        return (not self.unfinished and not self.failures
                and any(r.status == PASSED for r in self.results))

    @property
    def verdict(self) -> str:
        if self.unfinished:
            return self.unfinished
        if self.conformant:
            return "CONFORMANT"
        if not self.failures:
            return "NOT CONFORMANT: no case ran"
        return f"NOT CONFORMANT: {len(self.failures)} failures"

    def by_area(self) -> dict[str, dict[str, int]]:
        """``{area: {passed, failed, skipped}}`` in catalogue order (areas with cases only)."""
        table: dict[str, dict[str, int]] = {}
        for area in AREAS + tuple(sorted({r.area for r in self.results} - set(AREAS))):
            counts = {PASSED: 0, FAILED: 0, SKIPPED: 0}
            for r in self.results:
                if r.area == area:
                    counts[r.status] += 1
            if sum(counts.values()):
                table[area] = counts
        return table

    def to_dict(self) -> dict[str, Any]:
        return {"header": self.header, "verdict": self.verdict, "conformant": self.conformant,
                "finished": not self.unfinished, "summary": self.by_area(),
                "results": [asdict(r) for r in self.results]}


def describe_device(device: Any, mode: str, seed: int) -> dict[str, Any]:
    """The report header: suite, backend and device identity (``describe()``), settings."""
    backend = device.backend
    try:
        described = {str(k): str(v) for k, v in backend.describe().items()}
    except Exception as exc:  # a backend's describe() must not stop certification
        described = {"error": f"describe() raised {type(exc).__name__}: {exc}"}
    try:
        version = backend.version()
    except Exception:
        version = "unknown"
    return {
        "suite": "anytile-conformance", "suite_version": __version__,
        "backend": backend.name, "backend_version": version,
        "device": device.info.name, "device_description": device.info.description,
        "describe": described, "capabilities": sorted(device_capabilities(device)),
        "mode": mode, "seed": seed,
        "python": platform.python_version(), "numpy": np.__version__,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def device_capabilities(device: Any) -> frozenset:
    """The capabilities ``device`` declares (``Backend.device_capabilities``)."""
    return frozenset(device.backend.device_capabilities(device.info))


class CaseTimeout(Exception):
    """A case ran longer than the per-case limit."""


def _run_with_timeout(fn: Callable[[], None], seconds: Optional[float]) -> None:
    usable = (seconds and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        fn()
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise CaseTimeout(f"case did not finish within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(case: Case, device: Any, seed: int, capabilities: frozenset,
             timeout: Optional[float] = None) -> CaseResult:
    """Run one case and classify the outcome."""
    missing = sorted(case.needs - capabilities)
    if missing:
        return CaseResult(case.id, case.area, SKIPPED,
                          "backend does not declare capability " + ", ".join(f"'{m}'" for m in missing))
    start = time.perf_counter()
    try:
        _run_with_timeout(lambda: case.run(CaseContext(device, case, seed, capabilities)), timeout)
    except CaseFailure as failure:
        return CaseResult(case.id, case.area, FAILED, str(failure), time.perf_counter() - start)
    except Exception as exc:  # a crash of the backend or frontend fails the case
        return CaseResult(case.id, case.area, FAILED, _describe_crash(exc), time.perf_counter() - start)
    return CaseResult(case.id, case.area, PASSED, "", time.perf_counter() - start)


def _describe_crash(exc: BaseException) -> str:
    text = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    tail = "".join(traceback.format_list(frames[-3:])) if frames else ""
    return f"raised {text}" + (f"\n  last frames:\n{tail}" if tail else "")


def run_suite(device: Any, cases: Sequence[Case], mode: str, seed: int,
              on_result: Optional[Callable[[int, int, Case, CaseResult], None]] = None,
              timeout: Optional[float] = None) -> SuiteRun:
    """Run ``cases`` on ``device`` in order; ``on_result(index, total, case, result)`` is
    called after each (progress display).  Ctrl-C stops the run: the cases run so far are
    kept and the verdict says ``INTERRUPTED`` (``unfinished``)."""
    run = SuiteRun(describe_device(device, mode, seed))
    capabilities = device_capabilities(device)
    running: Optional[Case] = None
    try:
        for i, case in enumerate(cases):
            running = case
            result = run_case(case, device, seed, capabilities, timeout)
            run.results.append(result)
            running = None
            if on_result is not None:
                on_result(i, len(cases), case, result)
    except KeyboardInterrupt:
        where = f" (stopped in {running.id})" if running is not None else ""
        run.unfinished = (f"INTERRUPTED: {len(run.results)} of {len(cases)} cases ran{where}; "
                          f"no verdict")
    run.header["seconds"] = round(sum(r.seconds for r in run.results), 3)
    return run
