"""The suite must catch a broken backend, name the failing case, and skip by capability."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from anytile_conformance.case import expand_all
from anytile_conformance.cli import main
from anytile_conformance.runner import run_suite
from anytile_conformance.selection import compile_expression


def _cases(expr: str, mode: str = "quick"):
    keep = compile_expression(expr)
    return [c for c in expand_all(mode) if keep(c.id)]


def test_broken_xor_is_not_conformant_and_names_the_case(broken_device):
    run = run_suite(broken_device, _cases("compare-bitwise"), "quick", seed=1)
    assert not run.conformant
    failed = {r.case_id for r in run.failures}
    assert any("bitwise[op=xor" in f for f in failed), failed
    assert not any("op=and" in f or "op=or" in f for f in failed), failed
    assert run.verdict == f"NOT CONFORMANT: {len(failed)} failures"


def test_cli_reports_broken_backend(broken_device, tmp_path, capsys):
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    status = main(["--device", "broken-xor:0", "-k", "bitwise and xor", "--json", str(report),
                   "--junit", str(junit)])
    out = capsys.readouterr().out
    assert status == 1
    assert "NOT CONFORMANT:" in out and "FAIL compare-bitwise/bitwise[op=xor" in out
    data = json.loads(report.read_text())
    assert data["verdict"].startswith("NOT CONFORMANT") and data["header"]["backend"] == "broken-xor"
    assert any(r["status"] == "failed" and "op=xor" in r["case_id"] for r in data["results"])
    root = ET.parse(junit).getroot()
    verdict = [p.get("value") for p in root.iter("property") if p.get("name") == "verdict"]
    assert verdict and verdict[0].startswith("NOT CONFORMANT")
    assert root.find(".//failure") is not None


def test_reference_interpreter_is_conformant(interpreter, capsys):
    status = main(["--device", "interpreter", "-k", "bitwise or memory/masked_copy"])
    out = capsys.readouterr().out
    assert status == 0 and out.rstrip().endswith("CONFORMANT")


def test_missing_capabilities_skip_with_reason(bare_device):
    run = run_suite(bare_device, _cases("f16 or bf16 or f64 or atomics"), "quick", seed=1)
    skipped = [r for r in run.results if r.status == "skipped"]
    assert skipped and not run.failures
    assert all("backend does not declare capability" in r.message for r in skipped)
    assert any("'fp16'" in r.message for r in skipped)
    assert run.conformant      # every case it could run passed


def test_poisoned_outputs_catch_unwritten_elements(broken_device):
    # the early-exit case checks that masked-off programs leave the poison in place; the
    # reference passes it, so a pass here means the check ran on real data
    run = run_suite(broken_device, _cases("early_exit"), "quick", seed=3)
    assert run.conformant
