"""The catalogue's structure, selection and reports (no kernel runs here)."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from anytile_conformance.case import AREAS, expand_all
from anytile_conformance.report import summary_text, write_json, write_junit
from anytile_conformance.runner import CaseResult, SuiteRun
from anytile_conformance.selection import SelectionError, compile_expression


def test_every_area_has_cases_and_ids_are_unique():
    quick, full = expand_all("quick"), expand_all("full")
    assert {c.area for c in quick} == set(AREAS)
    assert len({c.id for c in full}) == len(full) > 2000
    assert 100 < len(quick) < 400
    assert {c.id for c in quick} <= {c.id for c in full}


def test_dtype_parameters_declare_capabilities():
    for case in expand_all("full"):
        if "dtype=f64" in case.id:
            assert "fp64" in case.needs
        if "dtype=bf16" in case.id:
            assert "bf16" in case.needs
        if case.area == "dot" and "i8" in case.id:
            assert "dot_int8" in case.needs


@pytest.mark.parametrize("expr, case_id, expected", [
    ("memory", "memory/masked_copy[dtype=f32]", True),
    ("memory and not f32", "memory/masked_copy[dtype=f32]", False),
    ("(dot or casts) and f16", "casts/cast[pair=f16xf32]", True),
    ("not (a or b)", "xyz", True),
    ("", "anything", True),
])
def test_selection(expr, case_id, expected):
    assert compile_expression(expr)(case_id) is expected


@pytest.mark.parametrize("bad", ["a and", "(a", "a b", "or a"])
def test_selection_errors(bad):
    with pytest.raises(SelectionError):
        compile_expression(bad)


def _run(statuses):
    header = {"suite_version": "9", "mode": "quick", "seed": 1, "backend": "toy",
              "backend_version": "1.2", "device": "toy:0", "device_description": "a toy",
              "describe": {"driver": "7"}, "capabilities": ["fp16"]}
    results = [CaseResult(f"{area}/c{i}", area, status, "bad bits" if status == "failed" else "")
               for i, (area, status) in enumerate(statuses)]
    return SuiteRun(header, results)


def test_verdict_and_summary():
    ok = _run([("memory", "passed"), ("dot", "skipped")])
    assert ok.conformant and ok.verdict == "CONFORMANT"
    bad = _run([("memory", "passed"), ("dot", "failed"), ("dot", "failed")])
    assert bad.verdict == "NOT CONFORMANT: 2 failures"
    text = summary_text(bad)
    assert text.endswith("NOT CONFORMANT: 2 failures")
    assert "toy 1.2" in text and "driver=7" in text and "FAIL dot/c1" in text
    assert not _run([("dot", "skipped")]).conformant     # nothing ran: no certificate


def test_json_and_junit_reports(tmp_path):
    run = _run([("memory", "passed"), ("dot", "failed"), ("casts", "skipped")])
    write_json(run, tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["verdict"] == run.verdict and data["header"]["backend_version"] == "1.2"
    assert data["summary"]["dot"] == {"passed": 0, "failed": 1, "skipped": 0}
    write_junit(run, tmp_path / "r.xml")
    root = ET.parse(tmp_path / "r.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["verdict"] == run.verdict and props["describe.driver"] == "7"
    assert [s.get("name") for s in root.iter("testsuite")] == ["memory", "casts", "dot"]
    assert root.find(".//failure").text == "bad bits"


def test_progress_bar_on_a_terminal_and_lines_elsewhere():
    import io

    from anytile_conformance.report import Progress

    class Named:
        id = "memory/x"

    tty, plain = io.StringIO(), io.StringIO()
    for stream, is_tty in ((tty, True), (plain, False)):
        progress = Progress(stream, tty=is_tty)
        progress(0, 2, Named(), CaseResult("memory/x", "memory", "passed"))
        progress(1, 2, Named(), CaseResult("memory/x", "memory", "failed", "bad"))
    assert "\r[" in tty.getvalue() and "FAIL memory/x" in tty.getvalue()
    assert plain.getvalue().splitlines() == ["[    1/2] PASS memory/x", "[    2/2] FAIL memory/x"]


def test_shards_partition_the_selection(capsys):
    from anytile_conformance.cli import main
    assert main(["--full", "--list", "-k", "memory"]) == 0
    whole = capsys.readouterr().out.split()
    parts = []
    for k in range(3):
        assert main(["--full", "--list", "-k", "memory", "--shard", f"{k}/3"]) == 0
        parts.append(capsys.readouterr().out.split())
    assert sorted(sum(parts, [])) == sorted(whole) and all(parts)
    with pytest.raises(SystemExit):
        main(["--list", "--shard", "3/3"])
