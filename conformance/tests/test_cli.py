"""The conformance command line refuses bad values before running anything, with a one-line
error (exit status 2), and checks that report paths can be written before a long run; the
reports never hold an earlier run's verdict, and Ctrl-C leaves them saying INTERRUPTED."""
import json
import os
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


def _conformance(*args):
    return subprocess.run([sys.executable, "-m", "anytile", "conformance", "--backend",
                           "interpreter", "-k", "program_ids", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["--fuzz", "-1"], "--fuzz wants a positive int, got '-1'"),
    (["--fuzz", "0"], "--fuzz wants a positive int, got '0'"),
    (["--timeout", "-1"], "--timeout wants a number of seconds from 0.001 to 1e+06, got '-1'"),
    (["--timeout", "inf"], "--timeout wants a number of seconds from 0.001 to 1e+06, got 'inf'"),
    (["--timeout", "nan"], "--timeout wants a number of seconds"),
    (["--timeout", "1e300"], "--timeout wants a number of seconds"),
    (["--json", "/dev/full"], "--json /dev/full: cannot write the report there (No space left"),
    (["--junit", "/dev/full"], "--junit /dev/full: cannot write the report there (No space left"),
    (["--json", "r.json", "--junit", "./r.json"], "--json and --junit both name ./r.json"),
    (["--json", "r.json", "--fuzz", "3"], "--json and --junit report a catalogue run"),
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


def test_a_device_that_cannot_run_leaves_a_not_run_report(tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"verdict": "CONFORMANT", "conformant": True}))
    done = subprocess.run([sys.executable, "-m", "anytile", "conformance", "--device", "nope:0",
                           "--json", str(report)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "no backend provides device 'nope:0'" in done.stderr
    data = json.loads(report.read_text())
    assert data["verdict"].startswith("NOT RUN: ") and not data["conformant"]


def test_dev_full_stays_a_device():
    _conformance("--json", "/dev/full")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


# -- Ctrl-C -------------------------------------------------------------------------------------
STALLS = """
import os
import threading

from anytile.backend import DeviceInfo, Target
from anytile.interpreter import InterpreterBackend


class Stalls(InterpreterBackend):
    \"\"\"The interpreter, stalling at its third launch until interrupted.\"\"\"

    name = device_prefix = "stalls"
    launches = 0

    def devices(self):
        return [DeviceInfo("stalls:0", 0, "stalls at its third launch")]

    def target_of(self, device):
        return Target(self.name, "reference")

    def launch(self, *args, **kwargs):
        Stalls.launches += 1
        if Stalls.launches == 3:
            open(os.environ["STALL_MARKER"], "w").close()
            threading.Event().wait()
        return super().launch(*args, **kwargs)
"""


def _wait_for(path, process, limit=300):
    deadline = time.monotonic() + limit    # a hang guard only: the marker comes when it comes
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never reached its stalling launch"
        time.sleep(0.05)


def _stalling_plugin(tmp_path, name="stalls"):
    """The environment of a process that has the stalling plugin installed as ``name``;
    the plugin creates ``tmp_path/stalled`` when it stalls."""
    site = tmp_path / "site"
    (site / "stalls_backend-1.0.dist-info").mkdir(parents=True)
    (site / "stalls_backend.py").write_text(STALLS.replace('"stalls', f'"{name}'))
    (site / "stalls_backend-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: stalls-backend\nVersion: 1.0\n")
    (site / "stalls_backend-1.0.dist-info" / "entry_points.txt").write_text(
        f"[anytile.backends]\n{name} = stalls_backend:Stalls\n")
    return {**os.environ, "STALL_MARKER": str(tmp_path / "stalled"),
            "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_ctrl_c_writes_interrupted_reports_and_one_line(tmp_path):
    env = _stalling_plugin(tmp_path)
    json_path, junit_path = tmp_path / "r.json", tmp_path / "r.xml"
    json_path.write_text(json.dumps({"verdict": "CONFORMANT", "conformant": True}))
    marker = tmp_path / "stalled"
    process = subprocess.Popen([sys.executable, "-m", "anytile", "conformance", "--device",
                                "stalls:0", "-k", "program_ids", "--json", str(json_path),
                                "--junit", str(junit_path)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(marker, process)
        # while it runs, no verdict is at the path: not the earlier CONFORMANT
        assert json.loads(json_path.read_text())["verdict"].startswith("INCOMPLETE: ")
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith("anytile conformance: INTERRUPTED: ") and "(stopped in programs/program_ids" in err
    assert str(json_path) in err and str(junit_path) in err
    data = json.loads(json_path.read_text())
    assert data["verdict"].startswith("INTERRUPTED: ") and not data["conformant"]
    assert not data["finished"] and data["verdict"] in err
    ran = len(data["results"])
    assert f"INTERRUPTED: {ran} of " in data["verdict"]
    root = ET.parse(junit_path).getroot()
    assert root.get("errors") == "1"
    assert [e.get("message") for e in root.iter("error")] == [data["verdict"]]


CONFORMANCE_ALL = Path(__file__).resolve().parents[2] / ".ci" / "conformance_all.py"


@pytest.mark.skipif(not CONFORMANCE_ALL.is_file(), reason="runs in a checkout of the repository")
def test_ctrl_c_stops_the_ci_run_with_one_line(tmp_path):
    """Ctrl-C reaches the whole process group, as a terminal's does."""
    env = _stalling_plugin(tmp_path, "aaa-stalls")     # certified first: sorted by name
    process = subprocess.Popen([sys.executable, str(CONFORMANCE_ALL), "-k", "program_ids"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        _wait_for(tmp_path / "stalled", process)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("anytile conformance: INTERRUPTED: ")
    assert lines[1:] == ["conformance: interrupted while certifying aaa-stalls"]
