#!/usr/bin/env python3
"""Triton's own tutorial kernels, called through the tutorials' own Python functions, timed
under real Triton and under anytile in one call, as a table of ratios.

    python3 benchmarks/triton_tutorials.py --triton CHECKOUT [--only softmax,matmul]
                                            [--repeat 2] [--quick] [--json OUT.json]

``CHECKOUT`` is a Triton checkout (or the files of one): its ``python/tutorials`` are read at
run time and nothing of them is stored here.  Each side runs in its own process, once with the
Triton installed on the machine (``python3 THIS --side triton``) and once under ``python3 -m
anytile run --as-triton --device cuda:0 THIS --side anytile``; with ``--repeat N`` the two
alternate N times and each row gives the median and range of its ratios.

A tutorial file is executed without its module-level tests and benchmarks: its imports,
functions, classes and plain assignments run (``if`` blocks too, unless they test
``__name__``), its expression statements, asserts and loops do not.  Every timed call is also
checked against torch on the same side (``ok`` in the table).  Timing is the same code on both
sides: CUDA events around each call after the L2 cache is flushed, the median of the calls
within a time budget, after a warm-up that includes any autotuning; the calls are queued behind
a GPU sleep, so the table compares the devices' work and not the two hosts' launch costs.

Rows (``--quick`` keeps the first shape or two of each):
  softmax   02's ``softmax`` (its persistent launch from ``n_regs`` and ``metadata.shared``), fp32
  matmul    03's ``matmul`` (its autotune menu), fp16 and bf16, square, ragged, small K and the
            M x N x K of LLM layers
  layernorm 05's ``LayerNorm.apply``, forward and backward, fp16
  attention 06's ``attention``, forward fp16 and fp8, backward fp16
  persistent 09's ``matmul``, ``matmul_persistent`` and ``matmul_descriptor_persistent``, fp16
  configs   03's ``matmul_kernel`` at each config of its autotune menu, launched directly (the
            autotuner's choice left out), fp16, three shapes; a config a side cannot compile
            (Triton: out of shared memory) is reported missing on that side
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

GROUPS = ("softmax", "matmul", "layernorm", "attention", "persistent", "configs")


# -- loading a tutorial without running its tests and benchmarks ---------------------------------
def _kept(stmt: ast.stmt) -> bool:
    """Whether a module-level statement of a tutorial defines something (kept) or runs a test
    or a benchmark (dropped)."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef,
                         ast.AsyncFunctionDef, ast.Try)):
        return True
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return True
    if isinstance(stmt, ast.If):
        return "__name__" not in ast.unparse(stmt.test)
    return False


def _calls_own_function(stmt: ast.stmt, defined: set[str]) -> bool:
    """Whether a statement calls a function the tutorial defines on arguments (``y =
    softmax(x)``: the tutorial checking itself at its own shapes; ``is_cuda()``, a question
    about the machine, is no such call)."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
               node.func.id in defined and (node.args or node.keywords)
               for node in ast.walk(stmt))


def load_tutorial(checkout: Path, stem: str, own_checks: bool = True) -> types.ModuleType:
    """The tutorial ``python/tutorials/<stem>*.py`` of ``checkout`` as a module
    (``own_checks=False``: without the assignments that call its own functions either)."""
    folder = checkout / "python" / "tutorials"
    matches = sorted(folder.glob(f"{stem}*.py"))
    if not matches:
        raise SystemExit(f"no tutorial {stem}*.py in {folder}")
    path = matches[0]
    tree = ast.parse(path.read_text(), str(path))
    tree.body = [s for s in tree.body if _kept(s)]
    if not own_checks:      # and what reads their results (``if torch.allclose(y_triton...``)
        defined = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.ClassDef))}
        dropped: set[str] = set()
        kept = []
        for s in tree.body:
            reads = {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}
            if isinstance(s, (ast.Assign, ast.AnnAssign, ast.If)) and \
                    (_calls_own_function(s, defined) or reads & dropped):
                dropped |= {n.id for n in ast.walk(s)
                            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                continue
            kept.append(s)
        tree.body = kept
    module = types.ModuleType(f"tutorial_{stem}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    exec(compile(tree, str(path), "exec"), module.__dict__)
    return module


# -- timing, the same on both sides ---------------------------------------------------------------
def bench(fn, budget_ms: float = 400.0, max_reps: int = 200) -> float:
    """Median milliseconds of ``fn()`` on the GPU, each call timed alone with the L2 cache
    flushed.  The calls are queued behind a GPU sleep, so that the GPU never waits for the
    host: what is timed is the device's work between the two events, not the host's launch
    cost (measured by ``benchmarks/gpu.py``'s tiny-launch row), which otherwise leaks in
    whenever one call's host time exceeds the flush's GPU time."""
    import torch
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 3, 1e-3)
    reps = int(max(5, min(max_reps, budget_ms / estimate)))
    times = []
    for first in range(0, reps, _QUEUED):
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(min(_QUEUED, reps - first))]
        torch.cuda._sleep(_SLEEP_CYCLES)        # the host queues the whole batch meanwhile
        for s, e in pairs:
            flush.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        times += [s.elapsed_time(e) for s, e in pairs]
    return statistics.median(times)


_QUEUED = 10                 # calls queued behind one sleep
_SLEEP_CYCLES = 40_000_000   # ~20 ms at 2 GHz: longer than the host needs to queue 10 calls


def close(actual, expected, atol: float, rtol: float = 0.0) -> bool:
    import torch
    return bool(torch.allclose(actual.float(), expected.float(), atol=atol, rtol=rtol))


# -- the rows -------------------------------------------------------------------------------------
def rows_softmax(checkout: Path, quick: bool):
    import torch
    tut = load_tutorial(checkout, "02")
    shapes = [(4096, 4096), (16384, 1024), (4096, 8000), (1823, 781)]
    for m, n in shapes[:2] if quick else shapes:
        x = torch.randn(m, n, device="cuda", dtype=torch.float32)
        ok = close(tut.softmax(x), torch.softmax(x, dim=1), 1e-6, 1e-5)
        ms = bench(lambda: tut.softmax(x))
        yield f"02 softmax fp32 {m}x{n}", "GB/s", 2 * x.numel() * 4 / ms * 1e-6, ok


def _matmul_shapes(quick: bool):
    square = [(4096, 4096, 4096, "fp16"), (8192, 8192, 8192, "fp16"), (4000, 4000, 4000, "fp16"),
              (8192, 4096, 512, "fp16")]
    llm = [(m, n, k, dt) for dt in ("fp16", "bf16")
           for (m, n, k) in ((16, 4096, 4096), (333, 11008, 4096), (1000, 4096, 11008),
                             (4097, 14336, 4096), (8192, 4096, 4096), (127, 128256, 4096))]
    if quick:
        return square[2:] + llm[1:2]
    return square + [(4096, 4096, 4096, "bf16")] + llm


def rows_matmul(checkout: Path, quick: bool):
    import torch
    tut = load_tutorial(checkout, "03")
    for m, n, k, dt in _matmul_shapes(quick):
        dtype = torch.float16 if dt == "fp16" else torch.bfloat16
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        ref = torch.matmul(a.float(), b.float())
        # fp16 out: an error of a few units in the last place of sums of k products of ~1
        ok = close(tut.matmul(a, b), ref, atol=0.05 * (k ** 0.5) / 8, rtol=1e-2)
        ms = bench(lambda: tut.matmul(a, b))
        yield f"03 matmul {dt} {m}x{n}x{k}", "TFLOP/s", 2 * m * n * k / ms * 1e-9, ok


def rows_configs(checkout: Path, quick: bool):
    import torch
    import triton
    tut = load_tutorial(checkout, "03", own_checks=False)
    kernel = tut.matmul_kernel
    shapes = [(8192, 4096, 512), (333, 11008, 4096), (4000, 4000, 4000)]
    for m, n, k in shapes[:1] if quick else shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        ref = torch.matmul(a.float(), b.float())
        for config in kernel.configs:
            meta = dict(config.kwargs)
            c = torch.empty(m, n, device="cuda", dtype=torch.float16)
            grid = (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)

            def run():
                kernel.fn[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0),
                                b.stride(1), c.stride(0), c.stride(1), ACTIVATION="",
                                num_warps=config.num_warps, num_stages=config.num_stages, **meta)
            try:
                run()
            except Exception:          # this side cannot compile it (Triton: OutOfResources)
                continue
            ok = close(c, ref, atol=0.05 * (k ** 0.5) / 8, rtol=1e-2)
            ms = bench(run, budget_ms=150)
            label = (f"{meta['BLOCK_SIZE_M']}x{meta['BLOCK_SIZE_N']}x{meta['BLOCK_SIZE_K']} "
                     f"w{config.num_warps} s{config.num_stages}")
            yield f"03 kernel {label} fp16 {m}x{n}x{k}", "TFLOP/s", 2 * m * n * k / ms * 1e-9, ok


def rows_layernorm(checkout: Path, quick: bool):
    import torch
    tut = load_tutorial(checkout, "05")
    shapes = [(4096, 1024), (4096, 4096), (4096, 8192)]
    for m, n in shapes[:1] if quick else shapes:
        dtype = torch.float16
        x = (-2.3 + 0.5 * torch.randn(m, n, device="cuda", dtype=dtype)).requires_grad_(True)
        w = torch.rand(n, device="cuda", dtype=dtype, requires_grad=True)
        bias = torch.rand(n, device="cuda", dtype=dtype, requires_grad=True)
        dy = 0.1 * torch.randn_like(x)
        y = tut.layer_norm(x, (n,), w, bias, 1e-5)
        ref = torch.nn.functional.layer_norm(x, (n,), w, bias, 1e-5)
        ok_fwd = close(y, ref, 1e-2)
        ms = bench(lambda: tut.layer_norm(x, (n,), w, bias, 1e-5))
        yield f"05 layer norm fwd fp16 {m}x{n}", "GB/s", 2 * x.numel() * 2 / ms * 1e-6, ok_fwd
        y.backward(dy, retain_graph=True)
        got = [t.grad.clone() for t in (x, w, bias)]
        for t in (x, w, bias):
            t.grad = None
        ref.backward(dy, retain_graph=True)
        want = [t.grad.clone() for t in (x, w, bias)]
        for t in (x, w, bias):
            t.grad = None
        ok_bwd = all(close(g, r, 5e-2 if i else 1e-2) for i, (g, r) in enumerate(zip(got, want)))
        ms = bench(lambda: y.backward(dy, retain_graph=True))
        yield f"05 layer norm bwd fp16 {m}x{n}", "GB/s", 3 * x.numel() * 2 / ms * 1e-6, ok_bwd


def rows_attention(checkout: Path, quick: bool):
    import torch
    tut = load_tutorial(checkout, "06")
    cases = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (4, 32, 1024, 64, False),
             (4, 32, 16384, 128, True)]
    for z, h, n_ctx, d, causal in cases[:2] if quick else cases:
        scale = 0.5
        q, k, v = (torch.empty(z, h, n_ctx, d, device="cuda", dtype=torch.float16)
                   .normal_(0.0, 0.5).requires_grad_() for _ in range(3))
        flops = 4.0 * z * h * n_ctx * n_ctx * d * (0.5 if causal else 1.0)
        name = f"{z}x{h}x{n_ctx}x{d}{' causal' if causal else ''}"
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                               scale=scale)
        out = tut.attention(q, k, v, causal, scale, False)
        ok = close(out, ref, 1e-2)
        ms = bench(lambda: tut.attention(q, k, v, causal, scale, False))
        yield f"06 attention fwd fp16 {name}", "TFLOP/s", flops / ms * 1e-9, ok
        dout = torch.randn_like(q)
        out.backward(dout, retain_graph=True)
        got = [t.grad.clone() for t in (q, k, v)]
        for t in (q, k, v):
            t.grad = None
        ref.backward(dout, retain_graph=True)
        want = [t.grad.clone() for t in (q, k, v)]
        for t in (q, k, v):
            t.grad = None
        ok = all(close(g, r, 2e-2) for g, r in zip(got, want))
        ms = bench(lambda: out.backward(dout, retain_graph=True))
        yield f"06 attention bwd fp16 {name}", "TFLOP/s", 2.5 * flops / ms * 1e-9, ok
        if hasattr(torch, "float8_e5m2") and not causal:
            q8, k8 = (t.detach().to(torch.float8_e5m2) for t in (q, k))
            v8 = v.detach().permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)
            ref8 = torch.nn.functional.scaled_dot_product_attention(
                q8.float(), k8.float(), v8.float(), scale=scale)
            ok = close(tut.attention(q8, k8, v8, causal, scale, False), ref8, 3.0)  # the tutorial's own atol
            ms = bench(lambda: tut.attention(q8, k8, v8, causal, scale, False))
            yield f"06 attention fwd fp8 {name}", "TFLOP/s", flops / ms * 1e-9, ok


def rows_persistent(checkout: Path, quick: bool):
    import torch
    tut = load_tutorial(checkout, "09")
    shapes = [(8192, 8192, 512), (8192, 8192, 4096)]
    for m, n, k in shapes[:1] if quick else shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        bt = b.T.contiguous()
        ref = torch.matmul(a.float(), b.float())
        kernels = [("naive", lambda: tut.matmul(a, bt.T)),
                   ("persistent", lambda: tut.matmul_persistent(a, bt.T))]
        if getattr(tut, "HAS_TENSOR_DESC", False):
            kernels.append(("descriptor persistent",
                            lambda: tut.matmul_descriptor_persistent(a, bt, False)))
        for label, fn in kernels:
            ok = close(fn(), ref, atol=1.0, rtol=1e-2)
            ms = bench(fn)
            yield f"09 {label} fp16 {m}x{n}x{k}", "TFLOP/s", 2 * m * n * k / ms * 1e-9, ok


def run_side(args: argparse.Namespace) -> None:
    """One side: every selected row, written as JSON lines to ``args.json``."""
    import torch
    torch.manual_seed(0)
    checkout = Path(args.triton)
    with open(args.json, "w") as out:
        for group in args.only:
            try:
                for name, unit, value, ok in globals()[f"rows_{group}"](checkout, args.quick):
                    out.write(json.dumps({"row": name, "unit": unit, "value": value,
                                          "ok": ok}) + "\n")
                    out.flush()
                    print(f"{args.side:8s} {name:48s} {value:9.1f} {unit} {'ok' if ok else 'WRONG'}",
                          flush=True)
            except Exception as exc:                 # a group that fails says so and goes on
                message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                out.write(json.dumps({"row": f"{group} (failed)", "error": message[:300]}) + "\n")
                print(f"{args.side:8s} {group}: FAILED {message[:300]}", flush=True)


# -- the parent: both sides, alternating, then the table -----------------------------------------
def side_command(side: str, args: argparse.Namespace, json_path: str) -> list[str]:
    tail = [__file__, "--side", side, "--triton", str(args.triton), "--only", ",".join(args.only),
            "--json", json_path] + (["--quick"] if args.quick else [])
    if side == "triton":
        return [sys.executable] + tail
    return [sys.executable, "-m", "anytile", "run", "--as-triton", "--device", "cuda:0"] + tail


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--triton", required=True, help="a Triton checkout (its python/tutorials)")
    p.add_argument("--only", default=",".join(GROUPS), help=f"groups: {', '.join(GROUPS)}")
    p.add_argument("--repeat", type=int, default=1, help="alternate the two sides this often")
    p.add_argument("--quick", action="store_true", help="the first shapes of each group only")
    p.add_argument("--timeout", type=float, default=1800, help="seconds for each side's run")
    p.add_argument("--json", help="write every measurement here")
    p.add_argument("--side", choices=("triton", "anytile"), help=argparse.SUPPRESS)
    args = p.parse_args()
    args.only = [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = [g for g in args.only if g not in GROUPS]
    if unknown:
        p.error(f"--only: unknown group(s) {', '.join(unknown)} (known: {', '.join(GROUPS)})")
    if not (Path(args.triton) / "python" / "tutorials").is_dir():
        p.error(f"--triton {args.triton}: no python/tutorials folder there")
    if args.side:
        run_side(args)
        return 0

    results: dict[str, dict[str, list]] = {"triton": {}, "anytile": {}}
    errors: dict[str, dict[str, str]] = {"triton": {}, "anytile": {}}
    order: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for side in (("triton", "anytile") if r % 2 == 0 else ("anytile", "triton")):
                path = os.path.join(tmp, f"{side}-{r}.jsonl")
                t0 = time.time()
                try:
                    subprocess.run(side_command(side, args, path), timeout=args.timeout, check=False)
                except subprocess.TimeoutExpired:
                    print(f"{side}: still running after {args.timeout:.0f} s, stopped")
                print(f"== {side} run {r + 1}: {time.time() - t0:.0f} s", flush=True)
                if not os.path.exists(path):
                    continue
                for line in open(path):
                    rec = json.loads(line)
                    if rec["row"] not in order:
                        order.append(rec["row"])
                    if "error" in rec:
                        errors[side][rec["row"]] = rec["error"]
                    else:
                        results[side].setdefault(rec["row"], []).append(rec)
    table = []
    print(f"\n| row | unit | anytile | Triton | ratio (median, range) | ok |\n|---|---|---|---|---|---|")
    for row in order:
        mine, theirs = results["anytile"].get(row, []), results["triton"].get(row, [])
        if row in errors["anytile"] or row in errors["triton"]:
            print(f"| {row} | | {errors['anytile'].get(row, '')} | {errors['triton'].get(row, '')} | | |")
            continue
        if not mine or not theirs:
            print(f"| {row} | | {'missing' if not mine else ''} | {'missing' if not theirs else ''} | | |")
            continue
        ratios = [a["value"] / t["value"] for a, t in zip(mine, theirs)]
        a_med = statistics.median(x["value"] for x in mine)
        t_med = statistics.median(x["value"] for x in theirs)
        ok = "yes" if all(x["ok"] for x in mine + theirs) else \
            f"anytile {'ok' if all(x['ok'] for x in mine) else 'WRONG'}, " \
            f"Triton {'ok' if all(x['ok'] for x in theirs) else 'WRONG'}"
        span = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
        print(f"| {row} | {mine[0]['unit']} | {a_med:.1f} | {t_med:.1f} | "
              f"{statistics.median(ratios):.2f}{span} | {ok} |")
        table.append({"row": row, "unit": mine[0]["unit"], "anytile": a_med, "triton": t_med,
                      "ratios": ratios, "ok": ok})
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": table, "errors": errors}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
