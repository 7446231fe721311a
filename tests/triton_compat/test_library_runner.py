"""``run_liger.py`` on a made-up library checkout: each test file gets its row (passed,
failed, skipped counts from pytest's report, a failure's message), run under ``anytile run
--as-triton`` from the checkout's root, and the summary adds them up."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUNNER = Path(__file__).with_name("run_liger.py")

FILES = {
    "test_scale.py": """
        import numpy as np
        import pytest
        import triton
        import triton.language as tl
        from mylib.ops import scale

        @pytest.mark.parametrize("n", [10, 100])
        def test_scale_matches(n):
            x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
            assert np.array_equal(scale(x, 3.0), 3.0 * x)

        def test_wrong_on_purpose():
            assert scale(np.ones(4, np.float32), 2.0)[0] == 5.0, "the library's own check"

        @pytest.mark.skipif(True, reason="needs a GPU")
        def test_gpu_only():
            pass
        """,
    "test_killed.py": """
        import os
        import signal

        def test_the_process_dies():
            os.kill(os.getpid(), signal.SIGKILL)     # as the out-of-memory killer does
        """,
    "test_internals.py": """
        from triton._C.libtriton import ir

        def test_never_collected():
            pass
        """,
}

LIBRARY = """
    import numpy as np
    import triton
    import triton.language as tl

    @triton.jit
    def _scale(x_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * a, mask=offs < n)

    def scale(x, a):
        out = np.full_like(x, np.nan)
        _scale[(triton.cdiv(x.size, 32),)](x, out, a, x.size, BLOCK=32)
        return out
    """


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    checkout = tmp_path_factory.mktemp("library")
    (checkout / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["src"]\n')
    (checkout / "src" / "mylib").mkdir(parents=True)
    (checkout / "src" / "mylib" / "__init__.py").write_text("")
    (checkout / "src" / "mylib" / "ops.py").write_text(textwrap.dedent(LIBRARY))
    (checkout / "tests").mkdir()
    for name, body in FILES.items():
        (checkout / "tests" / name).write_text(textwrap.dedent(body))
    out = checkout / "report.json"
    proc = subprocess.run([sys.executable, str(RUNNER), str(checkout), "--tests", "tests",
                           "--device", "interpreter", "--json", str(out), "--jobs", "2"],
                          capture_output=True, text=True, timeout=900)
    return proc, {Path(r["file"]).name: r for r in json.loads(out.read_text())["rows"]}


def test_each_file_gets_its_counts(report):
    proc, rows = report
    scale = rows["test_scale.py"]
    assert (scale["passed"], scale["failed"], scale["skipped"]) == (2, 1, 1), scale
    assert scale["failures"][0]["test"].endswith("test_wrong_on_purpose")
    assert "the library's own check" in scale["failures"][0]["message"]
    assert scale["broken"] == ""


def test_a_file_that_cannot_be_collected_is_an_error_with_the_reason(report):
    proc, rows = report
    internals = rows["test_internals.py"]
    assert internals["errors"] == 1 and internals["passed"] == 0, internals
    assert "anytile does not provide it" in internals["failures"][0]["message"]


def test_a_file_whose_process_is_killed_says_by_what(report):
    proc, rows = report
    killed = rows["test_killed.py"]
    assert killed["broken"].startswith("killed by SIGKILL"), killed
    assert "out-of-memory" in killed["broken"]


def test_the_summary_adds_up_and_the_status_says_failed(report):
    proc, _ = report
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "device interpreter:0: 2 passed, 1 failed, 1 errors, 1 skipped, 0 xfailed in 3 " \
           "files (1 did not finish)" in proc.stdout, proc.stdout


def test_against_a_peer_lists_what_only_this_side_failed(report, tmp_path):
    """A peer run (under real Triton on a GPU machine) that passed the test failing here, and
    failed another one that passes here: the first is listed with its message, the second
    counted."""
    proc, rows = report
    scale = rows["test_scale.py"]
    passed_here = "tests.test_scale::test_scale_matches[10]"
    peer = {"device": "triton", "rows": [dict(scale, failures=[
        {"test": passed_here, "kind": "failure", "message": "off"}])]}
    (tmp_path / "peer.json").write_text(json.dumps(peer))
    library = Path(proc.args[2])
    again = subprocess.run([sys.executable, str(RUNNER), str(library), "--tests", "tests",
                            "--device", "interpreter", "--only", "scale",
                            "--against", str(tmp_path / "peer.json")],
                           capture_output=True, text=True, timeout=900)
    assert "against the peer: 1 failed here and not there, 1 failed there and not here" \
        in again.stdout, again.stdout + again.stderr
    assert "test_wrong_on_purpose: " in again.stdout and "the library's own check" in again.stdout
