#!/usr/bin/env python3
"""Triton's tutorials' own kernels and Python functions at small shapes, checked against torch,
on any device, including the host GPU simulators where the tutorials' own shapes take hours.

    ANYTILE_GPU_SIMULATOR=1 anytile run --as-triton --device amdsim64:0 \\
        tests/triton_compat/run_tutorial_functions.py CHECKOUT [--only softmax,matmul]

CHECKOUT is a Triton checkout (or its files): its ``python/tutorials`` are read at run time
(loaded as ``benchmarks/triton_tutorials.py`` loads them: definitions kept, module-level
tests, benchmarks and calls of their own functions dropped) and nothing of them is stored
here.  Each case calls what the tutorial defines (``add``, ``softmax``, ``seeded_dropout``,
``LayerNorm.apply`` forward and backward, ``attention`` forward) with torch CPU tensors;
tutorial 03's ``matmul`` autotunes over a menu of large tiles, so its ``matmul_kernel`` runs
at the smallest config of its menu instead.  Prints one line per case and exits 1 if any failed.  A developer tool, not a
test: torch (CPU build) must be installed."""
from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from triton_tutorials import load_tutorial  # noqa: E402

CASES = ("add", "softmax", "matmul", "dropout", "layernorm", "attention")


def _close(name: str, got, want, atol: float, rtol: float = 0.0) -> str:
    import torch
    err = (got.double() - want.double()).abs().max().item()
    ok = torch.allclose(got.double(), want.double(), atol=atol, rtol=rtol)
    return f"{name} max error {err:.2e}" + ("" if ok else f" > {atol}")


def case_add(checkout: Path) -> list[str]:
    import torch
    tut = load_tutorial(checkout, "01", own_checks=False)
    x, y = torch.rand(1000), torch.rand(1000)
    return [_close("add", tut.add(x, y), x + y, 0.0)]


def case_softmax(checkout: Path) -> list[str]:
    import torch
    tut = load_tutorial(checkout, "02", own_checks=False)
    x = torch.randn(7, 100)
    return [_close("softmax", tut.softmax(x), torch.softmax(x, dim=1), 1e-6)]


def case_matmul(checkout: Path) -> list[str]:
    import torch
    import triton
    tut = load_tutorial(checkout, "03", own_checks=False)
    kernel = tut.matmul_kernel
    config = min(kernel.configs, key=lambda c: c.kwargs["BLOCK_SIZE_M"] * c.kwargs["BLOCK_SIZE_N"]
                 * c.kwargs["BLOCK_SIZE_K"] * c.num_warps)
    m, n, k = 40, 48, 80           # ragged: every edge masked
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    meta = dict(config.kwargs)
    grid = (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)
    kernel.fn[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                    c.stride(0), c.stride(1), ACTIVATION="leaky_relu",
                    num_warps=config.num_warps, num_stages=config.num_stages, **meta)
    want = torch.nn.functional.leaky_relu(a.double() @ b.double(), 0.01)
    label = (f"matmul_kernel {meta['BLOCK_SIZE_M']}x{meta['BLOCK_SIZE_N']}x{meta['BLOCK_SIZE_K']}"
             f" w{config.num_warps} s{config.num_stages}")
    return [_close(label, c, want, 2e-2, 1e-2)]


def case_dropout(checkout: Path) -> list[str]:
    import torch
    tut = load_tutorial(checkout, "04", own_checks=False)
    x = torch.randn(1000)
    first, again = tut.seeded_dropout(x, p=0.5, seed=123), tut.seeded_dropout(x, p=0.5, seed=123)
    other = tut.seeded_dropout(x, p=0.5, seed=512)
    kept = first != 0
    problems = []
    if not torch.equal(first, again):
        problems.append("the same seed gave another mask")
    if torch.equal(first, other):
        problems.append("another seed gave the same mask")
    if not 0.4 < kept.float().mean().item() < 0.6:
        problems.append(f"kept {kept.float().mean().item():.2f} of the elements, not about 0.5")
    if not torch.allclose(first[kept], x[kept] / 0.5):
        problems.append("kept elements are not x / (1 - p)")
    return [f"seeded_dropout {'; '.join(problems) or 'as specified'}"
            + (" > 0" if problems else "")]


def case_layernorm(checkout: Path) -> list[str]:
    import torch
    tut = load_tutorial(checkout, "05", own_checks=False)
    m, n = 6, 96
    x = (-2.3 + 0.5 * torch.randn(m, n)).requires_grad_(True)
    w, b = torch.rand(n).requires_grad_(True), torch.rand(n).requires_grad_(True)
    dy = 0.1 * torch.randn(m, n)
    y = tut.LayerNorm.apply(x, (n,), w, b, 1e-5)
    y.backward(dy)
    got = [y.detach(), x.grad.clone(), w.grad.clone(), b.grad.clone()]
    x64, w64, b64 = (t.detach().double().requires_grad_(True) for t in (x, w, b))
    y64 = torch.nn.functional.layer_norm(x64, (n,), w64, b64, 1e-5)
    y64.backward(dy.double())
    want = [y64.detach(), x64.grad, w64.grad, b64.grad]
    return [_close(f"layer norm {what}", g, e, 1e-4) for what, g, e in
            zip(("y", "dx", "dw", "db"), got, want)]


def case_attention(checkout: Path) -> list[str]:
    import torch
    tut = load_tutorial(checkout, "06", own_checks=False)
    z, h, n_ctx, d = 1, 2, 128, 64
    q, k, v = (torch.randn(z, h, n_ctx, d, dtype=torch.float16) * 0.5 for _ in range(3))
    out = []
    for causal in (False, True):
        got = tut.attention(q, k, v, causal, 0.5, False)
        scores = (q.double() @ k.double().transpose(2, 3)) * 0.5
        if causal:
            scores = scores.masked_fill(torch.ones(n_ctx, n_ctx).triu(1).bool(), float("-inf"))
        want = torch.softmax(scores, dim=-1) @ v.double()
        out.append(_close(f"attention forward causal={causal}", got, want, 1e-2))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkout", help="a Triton checkout (its python/tutorials)")
    p.add_argument("--only", default=",".join(CASES), help=f"cases: {', '.join(CASES)}")
    args = p.parse_args()
    import torch
    torch.manual_seed(0)
    failed = 0
    for name in args.only.split(","):
        if name not in CASES:
            p.error(f"--only: unknown case {name!r} (known: {', '.join(CASES)})")
        started = time.time()
        try:
            lines = globals()[f"case_{name}"](Path(args.checkout))
        except Exception as exc:            # a case that cannot run says why and the rest go on
            lines = [f"{name}: ERROR {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"]
            traceback.print_exc(limit=3)
        spent = time.time() - started
        for line in lines:
            bad = " > " in line or "ERROR" in line
            failed += bad
            print(f"{'FAIL' if bad else 'pass'} {line} ({spent:.0f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
