"""Reports of a suite run: the text summary (table by area + verdict), JSON and JUnit XML.
All three carry the same header (suite version, backend name and version, device, the
backend's ``describe()``) and the same verdict."""
from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from typing import IO, Any

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


def write_json(run: SuiteRun, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(run.to_dict(), f, indent=1)
        f.write("\n")


def junit_tree(run: SuiteRun) -> ET.ElementTree:
    """JUnit XML: one ``testsuite`` per area, header and verdict as ``properties``."""
    root = ET.Element("testsuites", name="anytile-conformance",
                      tests=str(len(run.results)), failures=str(len(run.failures)))
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


def write_junit(run: SuiteRun, path: str) -> None:
    tree = junit_tree(run)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)


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
