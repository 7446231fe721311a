"""Ctrl-C stops a long cpu launch: the caller waits for the workers, tells them to stop after
their current program, and raises KeyboardInterrupt (the process is not stuck until the
kernel ends)."""
import signal
import subprocess
import sys
import textwrap
import time

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import anytile as at
    import anytile.language as tl

    @at.jit
    def spin(out_ptr, steps):
        acc = tl.program_id(0).to(tl.float32)
        for i in range(steps):
            acc = acc * 0.999 + 1.0
        tl.store(out_ptr + tl.program_id(0), acc)

    out = np.zeros(64, np.float32)
    spin[(1,)](out, 1, device="cpu")          # compiled and warm
    print("launching", flush=True)
    try:
        spin[(64,)](out, 2_000_000_000, device="cpu")   # minutes of work
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    print("finished", flush=True)
""")


def test_ctrl_c_stops_a_long_launch(tmp_path):
    script = tmp_path / "spin.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "launching"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)   # without cancellation: many minutes
    finally:
        proc.kill()
    assert proc.returncode == 3, err
    assert "interrupted" in out
