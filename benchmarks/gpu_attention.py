"""Flash-attention forward on one GPU: anytile and Triton compiling the very same kernel
source, beside torch's scaled_dot_product_attention.  On a GPU machine:

    python3 benchmarks/gpu_attention.py [--quick] [--descriptors | --ablation] [--out FILE]

The kernel is our own, in the shape of Triton's fused-attention tutorial: the q tile (BM x D)
loaded once; per step K read as a D x BN tile by transposed addressing, ``qk = tl.dot(q, k)``,
online softmax with ``exp2``, ``acc = tl.dot(p.to(fp16), v, acc)``.  B=4, H=32, N=4096, fp16,
D 64 and 128, causal and not; each side's best of a few block configs (median of
``triton.testing.do_bench``); results checked against torch first.  Also printed per
anytile config: registers, spills, shared memory and compile time, and which instructions the
dots became (mma.sync / wgmma / FMA).  ``--descriptors``: the same pass written as Triton 3.6's
tutorial writes it, through tensor descriptors with K read as rows and transposed
(``desc_k.load(...).T``).  ``--ablation``: where the time goes instead, variants of the pointer
kernel (D=64, not causal) timed on both compilers, not checked (some change the math)."""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time

os.environ.setdefault("ANYTILE_DEVICE", "cuda:0")

import torch
import triton
import triton.language as ttl
from triton.testing import do_bench

import anytile as at
import anytile.language as tl

try:
    from triton.tools.tensor_descriptor import TensorDescriptor as TritonDescriptor
except ImportError:      # a Triton without host descriptors: --descriptors fails there
    TritonDescriptor = None


def make_attention(jit, lang):
    """The attention forward kernel decorated with ``jit``.  ``VARIANT`` ("base" but in
    ``--ablation``) changes what it computes: "k_rows" reads K as BN x D rows and transposes
    it, "no_exp" replaces ``exp2`` by a cheap polynomial, "one_dot" keeps only q.k (no softmax,
    no second dot)."""
    def attn_fwd(Q, K, V, O, sm_scale, N_CTX, stride_h, stride_n,
                 BM: lang.constexpr, BN: lang.constexpr, D: lang.constexpr,
                 CAUSAL: lang.constexpr, VARIANT: lang.constexpr):
        start_m = lang.program_id(0)
        off_h = lang.program_id(1)
        offs_m = start_m * BM + lang.arange(0, BM)
        offs_n = lang.arange(0, BN)
        offs_d = lang.arange(0, D)
        base = off_h.to(lang.int64) * stride_h
        q = lang.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
        m_i = lang.zeros((BM,), lang.float32) - float("inf")
        l_i = lang.zeros((BM,), lang.float32) + 1.0
        acc = lang.zeros((BM, D), lang.float32)
        qk_scale = sm_scale * 1.44269504
        hi = (start_m + 1) * BM if CAUSAL else N_CTX
        for start_n in range(0, hi, BN):
            if VARIANT == "k_rows":
                kr = lang.load(K + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
                qk = lang.dot(q, lang.trans(kr))
            else:
                k = lang.load(K + base + (start_n + offs_n)[None, :] * stride_n + offs_d[:, None])
                qk = lang.dot(q, k)
            if CAUSAL:
                qk = lang.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk, -1.0e6)
            if VARIANT == "one_dot":
                acc += qk
            else:
                m_ij = lang.maximum(m_i, lang.max(qk, 1) * qk_scale)
                qk = qk * qk_scale - m_ij[:, None]
                p = qk * 0.5 + 1.0 if VARIANT == "no_exp" else lang.math.exp2(qk)
                l_ij = lang.sum(p, 1)
                alpha = lang.math.exp2(m_i - m_ij)
                l_i = l_i * alpha + l_ij
                acc = acc * alpha[:, None]
                v = lang.load(V + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
                acc = lang.dot(p.to(lang.float16), v, acc)
                m_i = m_ij
        acc = acc / l_i[:, None]
        lang.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], acc.to(lang.float16))

    return jit(attn_fwd)


def make_attention_descriptors(jit, lang):
    """The same forward pass written as Triton 3.6's fused-attention tutorial writes it (our
    own code): Q, K, V and O are tensor descriptors over the ``(B H N) x D`` rows, K is read
    as rows and transposed (``.T``), the output stored through its descriptor."""
    def attn_fwd_desc(desc_q, desc_k, desc_v, desc_o, sm_scale, N_CTX,
                      BM: lang.constexpr, BN: lang.constexpr, D: lang.constexpr,
                      CAUSAL: lang.constexpr, VARIANT: lang.constexpr):
        start_m = lang.program_id(0)
        off_hz = lang.program_id(1)
        row0 = off_hz * N_CTX
        offs_m = start_m * BM + lang.arange(0, BM)
        offs_n = lang.arange(0, BN)
        q = desc_q.load([row0 + start_m * BM, 0])
        m_i = lang.zeros((BM,), lang.float32) - float("inf")
        l_i = lang.zeros((BM,), lang.float32) + 1.0
        acc = lang.zeros((BM, D), lang.float32)
        qk_scale = sm_scale * 1.44269504
        hi = (start_m + 1) * BM if CAUSAL else N_CTX
        for start_n in range(0, hi, BN):
            k = desc_k.load([row0 + start_n, 0]).T
            qk = lang.dot(q, k)
            if CAUSAL:
                qk = lang.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk, -1.0e6)
            m_ij = lang.maximum(m_i, lang.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
            p = lang.math.exp2(qk)
            l_ij = lang.sum(p, 1)
            alpha = lang.math.exp2(m_i - m_ij)
            l_i = l_i * alpha + l_ij
            acc = acc * alpha[:, None]
            v = desc_v.load([row0 + start_n, 0])
            acc = lang.dot(p.to(lang.float16), v, acc)
            m_i = m_ij
        acc = acc / l_i[:, None]
        desc_o.store([row0 + start_m * BM, 0], acc.to(lang.float16))

    return jit(attn_fwd_desc)


AT_ATTN = make_attention(at.jit, tl)
TR_ATTN = make_attention(triton.jit, ttl)
AT_ATTN_DESC = make_attention_descriptors(at.jit, tl)
TR_ATTN_DESC = make_attention_descriptors(triton.jit, ttl)
CONFIGS = [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 3), (64, 32, 4, 2)]


def flops(B, H, N, D, causal) -> float:
    f = 4.0 * B * H * N * N * D
    return f / 2 if causal else f


def instructions(ptx: str) -> str:
    """What the dots became, from the PTX: ``fma.f32`` counts the softmax's fused
    multiply-adds too (``enable_fp_fusion``: about one an element of a step's ``qk``), so a dot
    on FMAs shows as thousands of them, not tens."""
    counts = {k: len(re.findall(p, ptx)) for k, p in
              (("mma.sync", r"mma\.sync"), ("wgmma", r"wgmma\.mma_async"),
               ("fma.f32", r"\bfma\.rn\.f32"), ("ldmatrix", r"ldmatrix"),
               ("ld.local", r"ld\.local"), ("st.local", r"st\.local"))}
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def ablation() -> None:
    """Each ``VARIANT`` of the pointer kernel at a few configs, TFLOP/s on both compilers."""
    B, H, N, D = 4, 32, 4096, 64
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    flop = 4.0 * B * H * N * N * D
    rows = []
    for variant in ("base", "no_exp", "k_rows", "one_dot"):
        for (BM, BN, w, s) in ((128, 64, 8, 3), (64, 64, 4, 2), (128, 64, 4, 1)):
            cells = []
            for kern in (AT_ATTN, TR_ATTN):
                def run():
                    kern[(N // BM, B * H)](q, k, v, o, 0.125, N, N * D, D, BM=BM, BN=BN, D=D,
                                           CAUSAL=False, VARIANT=variant, num_warps=w,
                                           num_stages=s)
                try:
                    run()
                    cells.append(f"{flop / do_bench(run, return_mode='median') * 1e-9:.0f}")
                except Exception as exc:  # noqa: BLE001 -- a failing variant is reported
                    cells.append(f"error {type(exc).__name__}: {str(exc)[:80]}")
            rows.append(f"| {variant} | {BM}x{BN} w{w} s{s} | {cells[0]} | {cells[1]} |")
            print(rows[-1], flush=True)
    print("\n| variant | config | anytile TFLOP/s | Triton TFLOP/s |\n| --- | --- | --- | --- |")
    print("\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--descriptors", action="store_true",
                        help="the kernel written with tensor descriptors (Triton 3.6's tutorial shape)")
    parser.add_argument("--ablation", action="store_true",
                        help="time variants of the pointer kernel instead (diagnosis, unchecked)")
    args = parser.parse_args()
    if args.ablation:
        ablation()
        return
    kernels = (("anytile", AT_ATTN_DESC), ("triton", TR_ATTN_DESC)) if args.descriptors else \
        (("anytile", AT_ATTN), ("triton", TR_ATTN))
    B, H, N = (1, 4, 1024) if args.quick else (4, 32, 4096)
    lines = [f"attention forward, {torch.cuda.get_device_name()}, B={B} H={H} N={N} fp16, "
             f"Triton {triton.__version__}, torch {torch.__version__}", "",
             "| D | causal | anytile TFLOP/s (config) | Triton TFLOP/s (config) | SDPA TFLOP/s | "
             "anytile / Triton |", "| --- | --- | --- | --- | --- | --- |"]
    notes = []
    for D in (64, 128):
        for causal in (False, True):
            torch.manual_seed(0)
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16)
                       for _ in range(3))
            scale = 1.0 / math.sqrt(D)
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                   scale=scale)
            sdpa = do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal, scale=scale), return_mode="median")
            best = {}
            for side, kern in kernels:
                for BM, BN, warps, stages in CONFIGS:
                    if D == 128 and BM * BN > 128 * 64:
                        continue
                    o = torch.empty_like(q)
                    grid = (N // BM, B * H)
                    if args.descriptors:
                        make = at.TensorDescriptor if side == "anytile" else TritonDescriptor
                        rows = [B * H * N, D]
                        dq, dk, dv, do = (make(x.view(*rows), rows, [D, 1], blocks) for x, blocks in
                                          ((q, [BM, D]), (k, [BN, D]), (v, [BN, D]), (o, [BM, D])))

                    def run():
                        if args.descriptors:
                            kern[grid](dq, dk, dv, do, scale, N, BM=BM, BN=BN, D=D, CAUSAL=causal,
                                       VARIANT="base", num_warps=warps, num_stages=stages)
                            return
                        kern[grid](q, k, v, o, scale, N, N * D, D, BM=BM, BN=BN, D=D,
                                   CAUSAL=causal, VARIANT="base", num_warps=warps, num_stages=stages)
                    try:
                        t0 = time.perf_counter()
                        run()
                        torch.cuda.synchronize()
                        first = time.perf_counter() - t0
                        err = (o.float() - ref.float()).abs().max().item()
                        if not err < 2e-2:
                            notes.append(f"{side} D={D} causal={causal} {BM}x{BN} w{warps}: "
                                         f"max error {err:.3g}")
                            continue
                        ms = do_bench(run, return_mode="median")
                    except Exception as exc:  # noqa: BLE001 -- a failing config is reported
                        notes.append(f"{side} D={D} causal={causal} {BM}x{BN} w{warps}: "
                                     f"{type(exc).__name__}: {str(exc)[:200]}")
                        continue
                    tf = flops(B, H, N, D, causal) / ms * 1e-9
                    if side == "anytile":
                        args_of = (dq, dk, dv, do, scale, N) if args.descriptors else \
                            (q, k, v, o, scale, N, N * D, D)
                        h = kern.warmup(*args_of, BM=BM, BN=BN, D=D, CAUSAL=causal,
                                        VARIANT="base", num_warps=warps, num_stages=stages,
                                        grid=grid)
                        notes.append(f"anytile D={D} causal={causal} {BM}x{BN} w{warps} "
                                     f"s{stages}: {tf:.0f} TFLOP/s, regs {h.n_regs}, spills "
                                     f"{h.n_spills}, shared {h.metadata.shared}, first call "
                                     f"{first:.1f} s; {instructions(h.asm.get('ptx', ''))}")
                    print(side, D, causal, (BM, BN, warps, stages), f"{tf:.1f}", flush=True)
                    if tf > best.get(side, (0, None))[0]:
                        best[side] = (tf, f"{BM}x{BN} w{warps} s{stages}")
            at_tf, at_cfg = best.get("anytile", (0.0, "-"))
            tr_tf, tr_cfg = best.get("triton", (0.0, "-"))
            ratio = f"{at_tf / tr_tf:.2f}x" if tr_tf else "-"
            sd = flops(B, H, N, D, causal) / sdpa * 1e-9
            lines.append(f"| {D} | {causal} | {at_tf:.0f} ({at_cfg}) | {tr_tf:.0f} ({tr_cfg}) | "
                         f"{sd:.0f} | {ratio} |")
    text = "\n".join(lines + [""] + [f"- {n}" for n in notes])
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
