"""``anytile.testing`` (do_bench, assert_close, perf_report), the launch and compile hooks, the
profiler built on them, and the compiled-kernel handle (``n_regs``, ``metadata.shared``,
``compiled[grid](...)``), on every usable device."""
import json

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.testing import Benchmark, assert_close, do_bench, perf_report


@at.jit
def scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * factor, mask=offs < n)


def _arrays(device, n=1000):
    x = at.asarray(np.arange(n, dtype=np.float32), device=device)
    return x, at.zeros(n, np.float32, device=device)


def test_do_bench_times_a_kernel_on_its_device(device):
    x, out = _arrays(device)
    ms = do_bench(lambda: scale[(4,)](x, out, 1000, 2.0, BLOCK=256), warmup=1, rep=5)
    assert 0 < ms < 1e4
    quantiles = do_bench(lambda: scale[(4,)](x, out, 1000, 2.0, BLOCK=256), warmup=1, rep=5,
                         quantiles=[0.2, 0.5, 0.8])
    assert len(quantiles) == 3 and quantiles[0] <= quantiles[1] <= quantiles[2]
    np.testing.assert_array_equal(out.numpy(), 2 * np.arange(1000, dtype=np.float32))
    with pytest.raises(ValueError, match="return_mode"):
        do_bench(lambda: None, return_mode="best")


def test_assert_close():
    assert_close(np.float32([1.0, 2.0]), np.float64([1.005, 2.0]))
    with pytest.raises(AssertionError):
        assert_close(np.float32([1.0, 2.0]), np.float64([1.05, 2.0]))
    assert_close(at.asarray(np.ones(3, np.float32), device="interpreter"), np.ones(3), atol=0)


def test_perf_report_sweeps_and_writes(tmp_path, capsys):
    calls = []

    @perf_report(Benchmark(x_names=["n"], x_vals=[1, 2, 4], line_arg="side",
                           line_vals=["a", "b"], line_names=["A", "B"], plot_name="sweep",
                           args={"scale": 10}))
    def bench(n, side, scale):
        calls.append((n, side, scale))
        return float(n * scale) if side == "a" else (n, n - 0.5, n + 0.5)
    rows = bench.run(print_data=True, save_path=str(tmp_path))
    assert len(calls) == 6 and rows[2]["A"] == 40.0 and rows[2]["B-max"] == 4.5
    assert "sweep:" in capsys.readouterr().out
    assert (tmp_path / "sweep.csv").read_text().splitlines()[0] == "n,A,B"


def test_launch_hooks_see_every_launch_and_cost_nothing_when_unset(device):
    x, out = _arrays(device)
    scale[(4,)](x, out, 1000, 2.0, BLOCK=256)
    scale[(4,)](x, out, 1000, 2.0, BLOCK=256)
    seen = []
    at.knobs.runtime.launch_enter_hook = lambda info: seen.append(("enter", info.name, info.grid))
    at.knobs.runtime.launch_exit_hook = lambda info: seen.append(("exit", info.args["n"]))
    try:
        for _ in range(2):           # the fast path's entries were dropped: each launch is seen
            scale[(4,)](x, out, 1000, 3.0, BLOCK=256)
    finally:
        at.knobs.runtime.launch_enter_hook = None
        at.knobs.runtime.launch_exit_hook = None
    assert seen == [("enter", "scale", (4, 1, 1)), ("exit", 1000)] * 2
    np.testing.assert_array_equal(out.numpy(), 3 * np.arange(1000, dtype=np.float32))


def test_the_compile_listener_gets_stage_times(tmp_path, monkeypatch):
    monkeypatch.setenv("ANYTILE_CACHE_DIR", str(tmp_path))
    heard = []
    at.knobs.compilation.listener = heard.append
    try:
        at.compile(scale, target="interpreter:reference",
                   signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "factor": "fp32"},
                   constexprs={"BLOCK": 64})
    finally:
        at.knobs.compilation.listener = None
    (info,) = heard
    assert info.name == "scale" and "ir" in info.stage_times_s and not info.cache_hit


def test_the_profiler_counts_and_times_launches(device, tmp_path):
    x, out = _arrays(device)
    with at.profiler.profile() as prof:
        for _ in range(3):
            scale[(4,)](x, out, 1000, 2.0, BLOCK=256)
    (row,) = prof.summary()
    assert row["kernel"] == "scale" and row["launches"] == 3 and row["total_ms"] > 0
    assert "scale" in prof.table()
    prof.chrome_trace(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert len(events) == 3 and all(e["ph"] == "X" and e["dur"] > 0 for e in events)
    assert at.knobs.runtime.launch_enter_hook is None


def test_the_compiled_handle_launches_and_reports(device):
    x, out = _arrays(device)
    compiled = scale.warmup(x, out, 1000, 2.0, BLOCK=256, grid=(1,))
    assert compiled.metadata.shared >= 0
    assert compiled.n_regs is None or compiled.n_regs > 0
    compiled[(4,)](x, out, 1000, 5.0, 256)
    np.testing.assert_array_equal(out.numpy(), 5 * np.arange(1000, dtype=np.float32))
    aot = at.compile(scale, target="interpreter:reference",
                     signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "factor": "fp32"},
                     constexprs={"BLOCK": 64})
    with pytest.raises(at.BackendError, match="compiled ahead of time"):
        aot[(1,)](x, out, 1000, 5.0, 64)
