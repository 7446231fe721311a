"""Ctrl-C stops a long cpu launch at once, even inside one long program (a launch of one
program runs on the calling thread; in a pool launch that thread runs programs too): the
launch raises KeyboardInterrupt, the programs that had not started wrote nothing, and the
process is not stuck until the kernel ends.  The SIGINT is sent (to the whole process, as a
terminal's Ctrl-C is) once a program has started, never after a delay."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, threading, time
    import numpy as np
    import anytile as at
    import anytile.language as tl

    @at.jit
    def spin(out_ptr, started_ptr, rounds, steps):
        tl.store(started_ptr + tl.program_id(0), 1)
        acc = tl.program_id(0).to(tl.float32)
        for r in range(rounds):
            for i in range(steps):
                acc = acc * 0.999 + 1.0
        tl.store(out_ptr + tl.program_id(0), acc)

    programs = int(sys.argv[1])
    # the default device is found among every installed backend (PoCL, when probed, puts
    # LLVM's SIGINT handler in front of Python's)
    where = {"device": "cpu"} if sys.argv[2] == "cpu" else {}
    out = np.full(programs, np.nan, np.float32)
    started = np.zeros(programs, np.int32)
    spin[(programs,)](out, started, 1, 1, **where)        # compiled, warm, and quick
    out[:] = np.nan
    started[:] = 0

    def interrupt_once_started():
        while not started.any():          # polls memory the running programs write
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_started, daemon=True).start()
    try:
        spin[(programs,)](out, started, 1000, 2_000_000_000, **where)   # hours of work
        outcome = "finished"
    except KeyboardInterrupt:
        outcome = "interrupted"
    print(json.dumps({"outcome": outcome, "started": started.tolist(),
                      "written": (~np.isnan(out)).tolist()}), flush=True)
""")

HANG_GUARD = 300     # seconds; without cancellation inside programs: hours


@pytest.mark.parametrize("programs,device", [(1, "cpu"), (64, "cpu"), (1, "default")])
def test_ctrl_c_stops_a_long_launch_inside_its_programs(tmp_path, programs, device):
    script = tmp_path / "spin.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "ANYTILE_DEVICE"}
    proc = subprocess.Popen([sys.executable, str(script), str(programs), device], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=HANG_GUARD)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["outcome"] == "interrupted"
    # a program stopped inside its loop wrote nothing after the stop: here, nothing at all
    assert not any(result["written"])
    if programs > 1:
        assert not all(result["started"])     # the rest of the launch never started
