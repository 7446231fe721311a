#!/usr/bin/env python3
"""Run a Triton kernel library's own pytest suite (Liger-Kernel's op tests by default) with
anytile standing in for Triton, and print pass/fail/skip counts per test file.

    python tests/triton_compat/run_liger.py CHECKOUT [--device cpu] [--tests test/transformers]
        [--only rms_norm,swiglu] [--timeout 1800] [--json out.json] [-k EXPR]
        [--real-triton] [--against PEER.json] [--jobs 4]

CHECKOUT is a checkout of the library (``github:linkedin/Liger-Kernel``): its tests run where
they are, unmodified, and nothing of them is copied or stored.  Each test file runs in its own
process, from the checkout's root (so its ``pyproject.toml`` puts ``src`` on the path), as
``anytile run --as-triton --device DEVICE pytest FILE`` (``import triton`` gives anytile;
``ANYTILE_DEVICE`` is set for the library's own processes too).  The library's dependencies
(torch, transformers...) must be installed in this interpreter.  Counts come from pytest's
JUnit XML; ``--json`` also writes every failure's test id and the last line of its message.
``--real-triton`` runs the same files under the installed Triton instead (the peer, on a GPU
machine); ``--against PEER.json`` then lists the tests the peer passed and this run did not.
A developer tool, not a test: its exit status is 1 when a test failed or a file timed out."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

KINDS = ("passed", "failed", "errors", "skipped", "xfailed")


def pytest_script() -> str:
    """The ``pytest`` command of this interpreter (``anytile run`` runs it as a program)."""
    beside = Path(sys.executable).with_name("pytest")
    found = str(beside) if beside.is_file() else shutil.which("pytest")
    if not found:
        raise SystemExit("run_liger: pytest is not installed beside this interpreter")
    return found


def read_junit(path: Path) -> tuple[dict[str, int], list[dict[str, str]]]:
    """Counts by kind and the failed tests (id, message) of one JUnit XML report."""
    counts = dict.fromkeys(KINDS, 0)
    failures: list[dict[str, str]] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = next((child for child in case
                        if child.tag in ("failure", "error", "skipped")), None)
        if outcome is None:
            counts["passed"] += 1
            continue
        if outcome.tag == "skipped":
            xfail = (outcome.get("type") or "") == "pytest.xfail"
            counts["xfailed" if xfail else "skipped"] += 1
            continue
        counts["failed" if outcome.tag == "failure" else "errors"] += 1
        failures.append({"test": test_id, "kind": outcome.tag, "message": _reason(outcome)})
    return counts, failures


def _reason(outcome: ET.Element) -> str:
    """A failure's one-line reason: pytest's message, or for an error (a file that cannot be
    collected, a fixture that raised) the exception line of its report."""
    said = (outcome.get("message") or "").strip().splitlines()
    raised = [ln[1:].strip() for ln in (outcome.text or "").splitlines() if ln.startswith("E ")]
    if outcome.tag == "error" and raised:
        return raised[-1][:300]
    return (said[0] if said else raised[-1] if raised else "")[:300]


def run_file(checkout: Path, test_file: Path, device: str | None, timeout: float,
             extra: list[str]) -> dict:
    """One test file under ``anytile run --as-triton`` (``device`` None: under the installed
    Triton): counts, failures, seconds."""
    with tempfile.TemporaryDirectory(prefix="anytile-library-") as scratch:
        report = Path(scratch) / "junit.xml"
        runner = [sys.executable, "-m", "anytile", "run", "--as-triton", "--device", device,
                  pytest_script()] if device else [sys.executable, "-m", "pytest"]
        # pytest-rerunfailures (a dev dependency of Liger's) keeps each failed test's
        # exception, and through it the test's tensors, until the session ends
        cmd = [*runner, str(test_file.relative_to(checkout)), "-q", "-p", "no:randomly",
               "-p", "no:rerunfailures", "-p", "no:cacheprovider", "-o", "log_cli=false",
               f"--junitxml={report}", *extra]
        env = dict(os.environ, MPLBACKEND="Agg", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True,
                                  timeout=timeout)
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
            status = proc.returncode
            if status < 0:          # its last line says nothing of why it stopped
                name = signal.Signals(-status).name if -status in signal.valid_signals() \
                    else str(-status)
                tail = [f"killed by {name}" + (" (the out-of-memory killer sends it)"
                                               if name == "SIGKILL" else "")]
        except subprocess.TimeoutExpired:
            tail, status = [f"timed out after {timeout:.0f} s"], None
        seconds = round(time.monotonic() - start, 1)
        if report.is_file():
            counts, failures = read_junit(report)
        else:
            counts, failures = dict.fromkeys(KINDS, 0), []
    # pytest's status 1: tests failed; 2: interrupted (a file that cannot be collected is an
    # error in the report); 5: nothing collected; 3/4: an internal or usage error
    broken = status is None or status not in (0, 1, 2, 5) or (status in (1, 2) and not failures)
    return {"file": str(test_file.relative_to(checkout)), **counts, "seconds": seconds,
            "broken": tail[0][:200] if broken else "", "failures": failures}


def read_peer(path: Path) -> dict[str, dict]:
    """A peer run's rows (``--json``), by file."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"run_liger: --against {path}: {exc}")
    return {row["file"]: row for row in data["rows"]}


def print_against(peer: dict[str, dict], rows: list[dict]) -> None:
    """The tests that failed here in files the peer finished without failing them, with
    their messages; and how many the peer failed that passed here."""
    worse, better = [], 0
    for row in rows:
        theirs = peer.get(row["file"])
        if theirs is None or theirs["broken"] or row["broken"]:
            continue
        failed_there = {f["test"] for f in theirs["failures"]}
        failed_here = {f["test"] for f in row["failures"]}
        worse += [f for f in row["failures"] if f["test"] not in failed_there]
        better += len(failed_there - failed_here)
    print(f"\nagainst the peer: {len(worse)} failed here and not there, "
          f"{better} failed there and not here")
    for failure in worse:
        print(f"  {failure['test']}: {failure['message'][:160]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", type=Path, help="the library's checkout (its root)")
    ap.add_argument("--device", help="anytile device (default: anytile's default device)")
    ap.add_argument("--tests", default="test/transformers",
                    help="the test folder, relative to the checkout (default test/transformers)")
    ap.add_argument("--only", help="comma-separated parts of test file names to run")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per test file")
    ap.add_argument("--json", type=Path, help="also write the rows (and failures) here")
    ap.add_argument("-k", dest="keyword", help="pytest -k expression, for every file")
    ap.add_argument("--real-triton", action="store_true",
                    help="run under the installed Triton, not anytile (the peer's counts)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="test files run at once, each in its own process (default 1)")
    ap.add_argument("--against", type=Path,
                    help="a peer run's --json: list the tests it passed and this run did not")
    args = ap.parse_args(argv)
    folder = args.checkout / args.tests
    if not folder.is_dir():
        ap.error(f"{folder} is not a folder: is {args.checkout} the library's checkout?")
    files = sorted(folder.glob("test_*.py"))
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        files = [f for f in files if any(w in f.name for w in wanted)]
    if not files:
        ap.error(f"no test files to run in {folder}")
    peer = read_peer(args.against) if args.against else None
    device = None
    if not args.real_triton:
        import anytile as at
        device = args.device or at.default_device().name
        try:
            device = at.device(device).name
        except at.AnytileError as exc:
            ap.error(str(exc))
    extra = ["-k", args.keyword] if args.keyword else []
    rows = []
    print(f"{'file':<52} {'pass':>5} {'fail':>5} {'err':>4} {'skip':>5} {'xfail':>5} {'s':>7}")
    pool = ThreadPoolExecutor(max(1, args.jobs))
    runs = [pool.submit(run_file, args.checkout.resolve(), test_file.resolve(), device,
                        args.timeout, extra) for test_file in files]
    for done in as_completed(runs):     # printed as they finish, kept in file order
        row = done.result()
        rows.append(row)
        rows.sort(key=lambda r: r["file"])
        print(f"{Path(row['file']).name:<52} {row['passed']:>5} {row['failed']:>5} "
              f"{row['errors']:>4} {row['skipped']:>5} {row['xfailed']:>5} {row['seconds']:>7}"
              + (f"  {row['broken']}" if row["broken"] else ""), flush=True)
        if args.json:   # rewritten after every file, so a long run can be read while it goes
            args.json.write_text(json.dumps({"device": device or "triton", "rows": rows},
                                            indent=1))
    total = {k: sum(r[k] for r in rows) for k in KINDS}
    broken = sum(bool(r["broken"]) for r in rows)
    if peer is not None:
        print_against(peer, rows)
    print(f"\n{'device ' + device if device else 'Triton'}: {total['passed']} passed, {total['failed']} failed, "
          f"{total['errors']} errors, {total['skipped']} skipped, {total['xfailed']} xfailed "
          f"in {len(rows)} files" + (f" ({broken} did not finish)" if broken else ""))
    return 1 if total["failed"] or total["errors"] or broken else 0


if __name__ == "__main__":
    sys.exit(main())
