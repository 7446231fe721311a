"""``run_upstream.py`` on a made-up checkout: scripts written for Triton (``import triton``)
run with anytile standing in, and each gets the row it should: ran, failed or skipped."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUNNER = Path(__file__).with_name("run_upstream.py")

SCRIPTS = {
    # a kernel launched on NumPy arrays, libdevice imported the Triton way, its own check, and
    # a benchmark that is decorated and run but not timed
    "01-scale.py": """
        import numpy as np
        import triton
        import triton.language as tl
        from triton.language.extra import libdevice

        @triton.jit
        def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(out_ptr + offs, libdevice.fabs(x) * 2, mask=offs < n)

        @triton.testing.perf_report(triton.testing.Benchmark(
            x_names=["n"], x_vals=[1, 10**12], line_arg="p", line_vals=[1], line_names=["t"],
            plot_name="bench"))
        def bench(n, p):
            assert n == 1, "the runner sweeps the first x value only"
            return triton.testing.do_bench(lambda: None, warmup=1, rep=1)

        bench.run(print_data=True)
        x = np.random.default_rng(0).standard_normal(300).astype(np.float32)
        out = np.full_like(x, np.nan)
        scale[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, out, 300, BLOCK=128)
        assert np.allclose(out, 2 * np.abs(x)), "wrong result"
        print("max error", float(np.abs(out - 2 * np.abs(x)).max()))
        """,
    "03-autotuned.py": """
        import numpy as np
        import triton
        import triton.language as tl

        @triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 32})],
                         key=["n"])
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, offs, mask=offs < n)

        x = np.zeros(100, np.int32)
        k[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, 100)
        assert (x == np.arange(100)).all()
        print("tuned", k.best_config.kwargs)
        """,
    "04-wrong.py": """
        import numpy as np
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr):
            tl.store(x_ptr + tl.arange(0, 16), 1.0)

        x = np.zeros(16, np.float32)
        k[(1,)](x)
        assert x.sum() == 99, "the script's own check fails"
        """,
    "05-unsupported-builtin.py": """
        import numpy as np
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr):
            tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [tl.load(x_ptr)],
                                      dtype=tl.float32, is_pure=True, pack=1)

        k[(1,)](np.zeros(4, np.float32))
        """,
    "06-driver-utils.py": """
        import triton
        props = triton.runtime.driver.active.utils.get_device_properties(0)
        assert props["multiprocessor_count"] >= 1 and props["warpSize"] >= 1
        print(triton.runtime.driver.active.get_current_target().backend)
        """,
    "07-needs-cuda.py": """
        import torch
        x = torch.ones(4, device="cuda")
        """,
    "08-not-provided.py": """
        import triton
        triton.compile("kernel.ttgir")
        """,
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    checkout = tmp_path_factory.mktemp("triton-checkout")
    tutorials = checkout / "python" / "tutorials"
    tutorials.mkdir(parents=True)
    for name, body in SCRIPTS.items():
        (tutorials / name).write_text(textwrap.dedent(body))
    report = checkout / "report.json"
    cmd = [sys.executable, str(RUNNER), "--triton", str(checkout), "--device", "interpreter",
           "--jobs", "4", "--json", str(report)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 04 and 05 fail
    assert "3 ran, 2 failed, 2 skipped" in proc.stdout, proc.stdout
    return {Path(r["file"]).name: r for r in json.loads(report.read_text())["rows"]}


def test_triton_scripts_run_with_anytile(rows):
    assert rows["01-scale.py"]["result"] == "ran"
    assert rows["01-scale.py"]["detail"] == "max error 0.0"
    assert rows["03-autotuned.py"]["result"] == "ran"
    assert rows["03-autotuned.py"]["detail"].startswith("tuned {'BLOCK': ")
    assert rows["06-driver-utils.py"] == {**rows["06-driver-utils.py"], "result": "ran",
                                          "detail": "cpu"}


def test_what_cannot_run_here_is_skipped_with_the_reason(rows):
    assert rows["07-needs-cuda.py"]["result"] == "skipped"
    assert "torch" in rows["07-needs-cuda.py"]["detail"]
    assert rows["08-not-provided.py"]["result"] == "skipped"
    assert rows["08-not-provided.py"]["detail"] == \
        "triton.compile of Triton IR (kernel.ttgir) is not provided by anytile"


def test_failures_carry_the_error(rows):
    assert rows["04-wrong.py"]["result"] == "failed"
    assert rows["04-wrong.py"]["detail"] == "AssertionError: the script's own check fails"
    detail = rows["05-unsupported-builtin.py"]["detail"]
    assert rows["05-unsupported-builtin.py"]["result"] == "failed"
    assert detail.startswith("anytile: error: ") and "05-unsupported-builtin.py:8" in detail
    assert "inline_asm_elementwise" in detail


def test_only_unconditional_imports_are_needed():
    import importlib.util
    spec = importlib.util.spec_from_file_location("run_upstream", RUNNER)
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    found = runner.scan(textwrap.dedent("""
        import numpy
        try:
            import apex
        except ImportError:
            apex = None
        if True:
            from scipy import linalg

        def bench():
            from flash_attn import flash_attn_func
        """))
    assert found["modules"] == ["numpy", "scipy"]
