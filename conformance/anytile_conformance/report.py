"""Reports of a suite run: the text summary (table by area + verdict), JSON and JUnit XML.
All three carry the same header (suite version, backend name and version, device, the
backend's ``describe()``) and the same verdict."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import IO, Any, Optional

from . import __version__
from .runner import FAILED, PASSED, SKIPPED, CaseResult, SuiteRun


def header_lines(header: dict[str, Any]) -> list[str]:
    lines = [f"anytile conformance suite {header['suite_version']} ({header['mode']} mode, "
             f"seed {header['seed']})",
             f"backend: {header['backend']} {header['backend_version']}",
             f"device:  {header['device']}" + (f" ({header['device_description']})"
                                               if header.get("device_description") else "")]
    if header.get("describe"):
        lines.append("driver:  " + ", ".join(f"{k}={v}" for k, v in header["describe"].items()))
    lines.append("capabilities: " + (", ".join(header["capabilities"]) or "(none)"))
    return lines


def summary_text(run: SuiteRun, show_failures: int = 20) -> str:
    """The table by area, the failures (first ``show_failures`` in full) and the verdict."""
    out = header_lines(run.header) + [""]
    table = run.by_area()
    width = max([len("area")] + [len(a) for a in table])
    out.append(f"{'area':<{width}}  {'passed':>6}  {'failed':>6}  {'skipped':>7}")
    totals = {PASSED: 0, FAILED: 0, SKIPPED: 0}
    for area, counts in table.items():
        out.append(f"{area:<{width}}  {counts[PASSED]:>6}  {counts[FAILED]:>6}  {counts[SKIPPED]:>7}")
        for k in totals:
            totals[k] += counts[k]
    out.append(f"{'total':<{width}}  {totals[PASSED]:>6}  {totals[FAILED]:>6}  {totals[SKIPPED]:>7}")
    skipped_reasons = sorted({r.message for r in run.results if r.status == SKIPPED})
    if skipped_reasons:
        out += ["", "skipped because:"] + [f"  {m}" for m in skipped_reasons]
    failures = run.failures
    if failures:
        out += ["", "failures:"]
        for r in failures[:show_failures]:
            out.append(f"FAIL {r.case_id}")
            out += [f"  {line}" for line in r.message.splitlines()]
        if len(failures) > show_failures:
            out.append(f"... and {len(failures) - show_failures} more (see --json / --junit)")
    out += ["", run.verdict]
    return "\n".join(out)


class ReportError(Exception):
    """A report cannot be written; the message names the option, the path and the OS error."""


def json_bytes(run: SuiteRun) -> bytes:
    return (json.dumps(run.to_dict(), indent=1) + "\n").encode("utf-8")


def write_json(run: SuiteRun, path: str, option: str = "--json") -> None:
    write_report_file(path, json_bytes(run), option)


def junit_tree(run: SuiteRun) -> ET.ElementTree:
    """JUnit XML: one ``testsuite`` per area, header and verdict as ``properties``; a run
    that did not finish adds an error (CI marks it failed, never passed)."""
    root = ET.Element("testsuites", name="anytile-conformance",
                      tests=str(len(run.results) + bool(run.unfinished)),
                      failures=str(len(run.failures)), errors=str(int(bool(run.unfinished))))
    props = ET.SubElement(root, "properties")
    for key, value in _flat_header(run).items():
        ET.SubElement(props, "property", name=key, value=value)
    for area in run.by_area():
        results = [r for r in run.results if r.area == area]
        suite = ET.SubElement(root, "testsuite", name=area, tests=str(len(results)),
                              failures=str(sum(r.status == FAILED for r in results)),
                              skipped=str(sum(r.status == SKIPPED for r in results)),
                              time=f"{sum(r.seconds for r in results):.3f}")
        for r in results:
            _junit_case(suite, r)
    if run.unfinished:
        suite = ET.SubElement(root, "testsuite", name="run", tests="1", errors="1")
        case = ET.SubElement(suite, "testcase", classname="anytile_conformance.run",
                             name="finished")
        ET.SubElement(case, "error", message=run.unfinished)
    return ET.ElementTree(root)


def _flat_header(run: SuiteRun) -> dict[str, str]:
    flat = {k: (", ".join(v) if isinstance(v, list) else str(v))
            for k, v in run.header.items() if k != "describe"}
    flat.update({f"describe.{k}": str(v) for k, v in run.header.get("describe", {}).items()})
    flat["verdict"] = run.verdict
    return flat


def _junit_case(suite: ET.Element, r: CaseResult) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"anytile_conformance.{r.area}",
                         name=r.case_id, time=f"{r.seconds:.3f}")
    if r.status == FAILED:
        first = r.message.splitlines()[0] if r.message else "failed"
        node = ET.SubElement(case, "failure", message=first)
        node.text = r.message
    elif r.status == SKIPPED:
        ET.SubElement(case, "skipped", message=r.message)


def junit_bytes(run: SuiteRun) -> bytes:
    tree = junit_tree(run)
    ET.indent(tree)
    return ET.tostring(tree.getroot(), encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(run: SuiteRun, path: str, option: str = "--junit") -> None:
    write_report_file(path, junit_bytes(run), option)


# -- report files ------------------------------------------------------------------------------
def write_report_file(path: str, payload: bytes, option: str) -> None:
    """``payload`` into ``path``: a regular file is replaced whole (a reader, or a run that
    is stopped, never leaves half a report), a device or pipe (``/dev/stdout``) is written in
    place.  ``ReportError`` names ``option``, ``path`` and the OS error."""
    real = os.path.realpath(path)
    try:
        if os.path.exists(real) and not os.path.isfile(real):
            with open(real, "wb") as f:
                f.write(payload)
        else:
            _replace_file(real, payload)
    except OSError as exc:
        raise ReportError(f"{option} {path}: cannot write the report there "
                          f"({exc.strerror or exc})") from None


def _replace_file(real: str, payload: bytes) -> None:
    folder = os.path.dirname(real) or "."
    if not os.path.isdir(folder):
        raise FileNotFoundError(2, "No such file or directory: the folder does not exist")
    try:
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(real)}.",
                                         suffix=".tmp")
    except PermissionError:         # a writable file in a folder we may not add files to
        with open(real, "wb") as f:
            f.write(payload)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.chmod(temporary, _mode_for(real))
        os.replace(temporary, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _mode_for(real: str) -> int:
    """The permissions a report gets: those of the file it replaces, else the umask's."""
    try:
        return os.stat(real).st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


@dataclass
class ReportFiles:
    """Where a run's reports go (``--json``, ``--junit``).  ``start`` replaces whatever
    was there by an INCOMPLETE report, so an earlier verdict never outlives a run that is
    killed; ``write`` puts the run's own report there."""

    json: Optional[str] = None
    junit: Optional[str] = None

    @property
    def paths(self) -> list[str]:
        return [p for p in (self.json, self.junit) if p]

    def problem(self) -> Optional[str]:
        """Why these paths cannot take the reports (checked before a long run), or None."""
        if self.json and self.junit and _same_file(self.json, self.junit):
            return (f"--json and --junit both name {self.junit}: each report needs a file of "
                    f"its own")
        for option, path in (("--json", self.json), ("--junit", self.junit)):
            if path and os.path.isdir(path):
                return f"{option} {path}: is a folder; name the report file"
            if path and not os.path.isdir(os.path.dirname(os.path.realpath(path)) or "."):
                return f"{option} {path}: cannot write the report there (its folder does not exist)"
        return None

    def start(self, header: dict[str, Any]) -> None:
        self.write(SuiteRun(header, unfinished=(
            f"INCOMPLETE: the run started at {header['started']} (process {os.getpid()}) has "
            f"not written its verdict: it is running, or it was stopped")))

    def write(self, run: SuiteRun) -> None:
        if self.json:
            write_json(run, self.json)
        if self.junit:
            write_junit(run, self.junit)


def run_header(mode: str, seed: int, target: str) -> dict[str, Any]:
    """The header of a report written before the device is known (INCOMPLETE, NOT RUN)."""
    return {"suite": "anytile-conformance", "suite_version": __version__, "target": target,
            "mode": mode, "seed": seed,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


class Progress:
    """A one-line progress bar on a terminal; one plain line per case elsewhere (CI logs)."""

    def __init__(self, stream: IO[str] | None = None, tty: bool | None = None) -> None:
        self.stream = sys.stdout if stream is None else stream
        self.tty = self.stream.isatty() if tty is None else tty
        self.failed = 0

    def __call__(self, index: int, total: int, case: Any, result: CaseResult) -> None:
        self.failed += result.status == FAILED
        if self.tty:
            width = 30
            done = int(width * (index + 1) / max(total, 1))
            bar = "#" * done + "." * (width - done)
            text = f"\r[{bar}] {index + 1}/{total} failed {self.failed}  {case.id[:60]:<60}"
            self.stream.write(text)
            if index + 1 == total:
                self.stream.write("\n")
            if result.status == FAILED:
                self.stream.write(f"\rFAIL {case.id}{' ' * 40}\n")
        else:
            word = {PASSED: "PASS", FAILED: "FAIL", SKIPPED: "SKIP"}[result.status]
            self.stream.write(f"[{index + 1:>5}/{total}] {word} {case.id}\n")
        self.stream.flush()
