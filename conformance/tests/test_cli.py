"""The conformance command line refuses bad values before running anything, with a one-line
error (exit status 2), and checks that report paths can be written before a long run."""
import subprocess
import sys

import pytest


def _conformance(*args):
    return subprocess.run([sys.executable, "-m", "anytile", "conformance", "--backend",
                           "interpreter", "-k", "program_ids", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["--fuzz", "-1"], "--fuzz wants a positive int, got '-1'"),
    (["--fuzz", "0"], "--fuzz wants a positive int, got '0'"),
    (["--timeout", "-1"], "--timeout wants a positive float"),
    (["--shard", "-1/2"], "--shard K/N needs 0 <= K < N, got '-1/2'"),
    (["--shard", "2/2"], "--shard K/N needs 0 <= K < N"),
    (["--shard", "x"], "--shard wants K/N"),
    (["--json", "/nonexistent-folder/r.json"], "--json /nonexistent-folder/r.json: cannot write"),
    (["--junit", "/nonexistent-folder/r.xml"], "--junit /nonexistent-folder/r.xml: cannot write"),
])
def test_bad_values_are_refused_before_running(args, message):
    done = _conformance(*args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert "running" not in done.stdout


def test_reports_are_written(tmp_path):
    done = _conformance("--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"))
    assert done.returncode == 0 and "CONFORMANT" in done.stdout
    assert (tmp_path / "r.json").stat().st_size > 0 and (tmp_path / "r.xml").stat().st_size > 0
