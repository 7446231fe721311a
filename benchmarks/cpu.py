"""CPU benchmarks: anytile's cpu backend beside NumPy, numba and a hand-written C loop,
measured in the same run.

    make bench-cpu            # or: .venv/bin/python benchmarks/cpu.py [--quick] [--out FILE]
    .venv/bin/python benchmarks/cpu.py --only vector-add,launch     # some rows only

Peers: NumPy in its ``out=`` forms (no allocation in the timed code), numba
``@njit(parallel=True)`` loops, and for vector add the machine's limit: a C loop on all
cores, compiled here with ``cc -O3 -march=native`` (non-temporal stores, the best a
hand-written loop does; the row says why when there is no C compiler).  Each row is
timed in interleaved rounds (anytile, then each peer, again and again), so a busy neighbour
slows everyone alike: a cell is the median of the rounds' medians, a ratio (peer time /
anytile time, > 1: anytile is faster) the median of the rounds' ratios with their range.
Every result is checked against NumPy before it is timed.

``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` slow NumPy's BLAS on some machines: the script
runs itself again without them (``--keep-openblas-env`` keeps them)."""
from __future__ import annotations

import argparse
import ctypes
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

_OPENBLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if "--keep-openblas-env" not in sys.argv and any(v in os.environ for v in _OPENBLAS):
    print(f"note: running without {', '.join(v for v in _OPENBLAS if v in os.environ)} "
          "(fair to NumPy's BLAS)", flush=True)
    env = {k: v for k, v in os.environ.items() if k not in _OPENBLAS}
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

# numba's OpenMP/TBB workers spin after a parallel region and would steal the cores from
# whatever is timed next; its workqueue layer sleeps instead
os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")

import numpy as np  # noqa: E402

import anytile as at  # noqa: E402
from kernels import add_kernel, layernorm_kernel, matmul_kernel, softmax_kernel  # noqa: E402

try:
    import ml_dtypes
except ImportError:  # the bf16 matmul row needs it
    ml_dtypes = None

try:
    import numba
    from numba import njit, prange
except ImportError:  # numba is optional: its columns then say so
    numba = None


# -- numba peers ------------------------------------------------------------------------------
if numba is not None:
    @njit(parallel=True, fastmath=False, cache=False)
    def numba_add(x, y, out):
        for i in prange(x.size):
            out[i] = x[i] + y[i]

    @njit(parallel=True)
    def numba_softmax(x, out):
        for r in prange(x.shape[0]):
            m = x[r].max()
            e = np.exp(x[r] - m)
            out[r] = e / e.sum()

    @njit(parallel=True)
    def numba_layernorm(x, w, b, eps, out):
        n = x.shape[1]
        for r in prange(x.shape[0]):
            mean = x[r].sum() / n
            d = x[r] - mean
            rstd = 1.0 / np.sqrt((d * d).sum() / n + eps)
            out[r] = d * rstd * w + b

    @njit(parallel=True)
    def numba_matmul(a, b, out):
        # rows in parallel, i-k-j order: the inner loop runs along rows of b and out (SIMD)
        n, kk = a.shape
        m = b.shape[1]
        for i in prange(n):
            row = np.zeros(m, np.float32)
            for k in range(kk):
                aik = a[i, k]
                for j in range(m):
                    row[j] += aik * b[k, j]
            out[i, :] = row


# -- the C limit of vector add ----------------------------------------------------------------
C_ADD = textwrap.dedent("""
    #include <pthread.h>
    #include <stddef.h>
    #include <stdint.h>
    #if defined(__x86_64__) || defined(__i386__)
    #include <immintrin.h>
    #endif

    typedef struct { const float *x, *y; float *z; long lo, hi; int streaming; } part;

    static void *add_part(void *arg) {
        const part *p = (const part *)arg;
        const float *x = p->x, *y = p->y;
        float *z = p->z;
        long i = p->lo, hi = p->hi;
        if (!p->streaming) {
            for (; i < hi; i++) z[i] = x[i] + y[i];
            return 0;
        }
    #if defined(__AVX512F__)
        for (; i < hi && ((uintptr_t)(z + i) & 63); i++) z[i] = x[i] + y[i];
        for (; i + 16 <= hi; i += 16)
            _mm512_stream_ps(z + i, _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
        _mm_sfence();
    #elif defined(__AVX__)
        for (; i < hi && ((uintptr_t)(z + i) & 31); i++) z[i] = x[i] + y[i];
        for (; i + 8 <= hi; i += 8)
            _mm256_stream_ps(z + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        _mm_sfence();
    #endif
        for (; i < hi; i++) z[i] = x[i] + y[i];
        return 0;
    }

    /* z = x + y on `threads` threads (the caller is one), split at 64-byte boundaries;
       `streaming`: non-temporal stores (past the caches) */
    void add_limit(const float *x, const float *y, float *z, long n, int threads, int streaming) {
        part parts[64];
        pthread_t ids[64];
        if (threads > 64) threads = 64;
        long lo = 0;
        for (int t = 0; t < threads; t++) {
            long hi = n * (t + 1) / threads;
            if (t + 1 < threads) hi -= ((uintptr_t)(z + hi) & 63) / sizeof(float);
            if (hi < lo) hi = lo;
            parts[t] = (part){x, y, z, lo, hi, streaming};
            lo = hi;
        }
        for (int t = 1; t < threads; t++) pthread_create(&ids[t], 0, add_part, &parts[t]);
        add_part(&parts[0]);
        for (int t = 1; t < threads; t++) pthread_join(ids[t], 0);
    }
""")


def c_add_limit() -> tuple[object, str]:
    """``(add_limit(x, y, z), how it was built)``, or ``(None, why not)``."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None, "skipped: no C compiler (cc, gcc or clang) on PATH"
    folder = tempfile.mkdtemp(prefix="anytile-bench-")
    src, lib = os.path.join(folder, "add.c"), os.path.join(folder, "add.so")
    with open(src, "w") as f:
        f.write(C_ADD)
    flags = ["-O3", "-march=native", "-shared", "-fPIC", "-pthread"]
    done = subprocess.run([cc, *flags, src, "-o", lib], capture_output=True, text=True)
    if done.returncode:
        return None, f"skipped: {cc} failed: {done.stderr.strip()[:200]}"
    fn = ctypes.CDLL(lib).add_limit
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_int, ctypes.c_int]
    fn.restype = None
    threads = at.device("cpu").info.props.get("cores", os.cpu_count() or 1)

    def run(x: np.ndarray, y: np.ndarray, z: np.ndarray, streaming: bool) -> None:
        fn(x.ctypes.data, y.ctypes.data, z.ctypes.data, x.size, threads, int(streaming))
    return run, (f"{os.path.basename(cc)} {' '.join(flags[:2])}, {threads} threads (a thread "
                 f"started per call), the faster of plain and non-temporal stores in each round")


# -- timing -----------------------------------------------------------------------------------
def median_time(fn, repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved(fns: dict, rounds: int, repeat: int) -> dict:
    """``name -> [median time of each round]``: every function once per round, in turn."""
    times: dict = {name: [] for name, fn in fns.items() if fn is not None}
    for _ in range(rounds):
        for name in times:
            times[name].append(median_time(fns[name], repeat))
    return times


def check(name: str, got: np.ndarray, ref: np.ndarray, tol: float) -> None:
    err = float(np.max(np.abs(got.astype(np.float64) - ref)))
    if not err <= tol:
        raise AssertionError(f"{name}: max abs error {err:.3g} > {tol}")


PEERS = ("numpy", "numba", "C limit")
#: the row sets ``--only`` picks from, in the order they run
ROW_SETS = ("vector-add", "softmax-layernorm", "matmul", "launch")


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.notes: list[str] = []

    def add(self, kernel: str, size: str, times: dict) -> None:
        at_rounds = times.pop("anytile")
        cells = {}
        for peer, rounds in times.items():
            ratios = [p / a for p, a in zip(rounds, at_rounds)]
            cells[peer] = (statistics.median(rounds), statistics.median(ratios), min(ratios),
                           max(ratios))
        self.rows.append((kernel, size, statistics.median(at_rounds), cells))
        text = ", ".join(f"{peer} {c[0] * 1e3:.2f} ms ({c[1]:.2f}x, {c[2]:.2f}-{c[3]:.2f})"
                         for peer, c in cells.items())
        print(f"{kernel:<20} {size:<10} anytile {statistics.median(at_rounds) * 1e3:8.2f} ms | "
              f"{text}", flush=True)

    def markdown(self, header: str) -> str:
        lines = [header, "", "| kernel | size | anytile cpu | " + " | ".join(PEERS) + " | " +
                 " | ".join(f"vs {p}" for p in PEERS) + " |", "|" + " --- |" * (3 + 2 * len(PEERS))]
        for kernel, size, t_at, cells in self.rows:
            unit, scale = ("us", 1e6) if t_at < 1e-4 else ("ms", 1e3)
            times = [f"{cells[p][0] * scale:.2f} {unit}" if p in cells else "n/a" for p in PEERS]
            ratios = [f"{cells[p][1]:.2f}x ({cells[p][2]:.2f}-{cells[p][3]:.2f})" if p in cells
                      else "n/a" for p in PEERS]
            lines.append(f"| {kernel} | {size} | {t_at * scale:.2f} {unit} | " +
                         " | ".join(times) + " | " + " | ".join(ratios) + " |")
        lines += [""] + [f"- {note}" for note in self.notes]
        return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--out", help="also write the markdown table here")
    parser.add_argument("--rounds", type=int,
                        help="interleaved rounds per row (default 5, 3 with --quick)")
    parser.add_argument("--keep-openblas-env", action="store_true",
                        help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (see the docstring)")
    parser.add_argument("--only", metavar="ROWS",
                        help=f"comma-separated row sets to run, of {','.join(ROW_SETS)} "
                             "(default: all)")
    args = parser.parse_args()
    only = set(ROW_SETS) if args.only is None else set(args.only.split(","))
    if only - set(ROW_SETS):
        parser.error(f"unknown row sets {','.join(sorted(only - set(ROW_SETS)))}; "
                     f"known: {','.join(ROW_SETS)}")
    dev = at.device("cpu")
    rng = np.random.default_rng(0)
    rep = 3 if args.quick else 5
    rounds = args.rounds or (3 if args.quick else 5)
    table = Table()
    c_limit, c_how = c_add_limit() if "vector-add" in only else (None, "")
    if c_how:
        table.notes.append(f"C limit (vector add): {c_how}")

    # vector add: 2^20 fits in the cache (the pool's hand-off shows), the others stream
    for lg in ((20,) if args.quick else (20, 24, 26)) if "vector-add" in only else ():
        n = 2 ** lg
        x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        out = np.full(n, np.nan, np.float32)
        xa, ya, oa = (at.asarray(a, device=dev) for a in (x, y, out))
        grid = (at.cdiv(n, 4096),)
        add_kernel[grid](xa, ya, oa, n, BLOCK=4096)
        check("vector add", oa.numpy(), x.astype(np.float64) + y, 1e-6)
        peers = {"numpy": lambda: np.add(x, y, out=out)}
        if numba:
            peers["numba"] = lambda: numba_add(x, y, out)
        if c_limit:
            for streaming in (False, True):
                out[:] = np.nan
                c_limit(x, y, out, streaming)
                check("C limit", out, x.astype(np.float64) + y, 1e-6)
            peers["C plain"] = lambda: c_limit(x, y, out, False)
            peers["C streaming"] = lambda: c_limit(x, y, out, True)
        times = interleaved({"anytile": lambda: add_kernel[grid](xa, ya, oa, n, BLOCK=4096),
                             **peers}, rounds, rep)
        if c_limit:
            times["C limit"] = [min(p, q) for p, q in zip(times.pop("C plain"),
                                                          times.pop("C streaming"))]
        table.add("vector add fp32", f"2^{lg}", times)
        del x, y, out, xa, ya, oa

    if "softmax-layernorm" in only:
        # fused softmax
        R, C = (1024, 1024) if args.quick else (4096, 4096)
        xs = rng.standard_normal((R, C), dtype=np.float32)
        outs = np.full((R, C), np.nan, np.float32)
        xsa, osa = at.asarray(xs, device=dev), at.asarray(outs, device=dev)
        B = at.next_power_of_2(C)
        softmax_kernel[(R,)](osa, xsa, C, C, C, BLOCK=B)
        x64 = xs.astype(np.float64)
        ref = np.exp(x64 - x64.max(1, keepdims=True))
        check("softmax", osa.numpy(), ref / ref.sum(1, keepdims=True), 1e-6)
        row_tmp = np.empty((R, 1), np.float32)
        tmp = np.empty((R, C), np.float32)

        def np_softmax():
            np.max(xs, axis=1, keepdims=True, out=row_tmp)
            np.subtract(xs, row_tmp, out=tmp)
            np.exp(tmp, out=tmp)
            np.sum(tmp, axis=1, keepdims=True, out=row_tmp)
            np.divide(tmp, row_tmp, out=outs)
        np_softmax()
        check("numpy softmax", outs, ref / ref.sum(1, keepdims=True), 1e-6)
        times = interleaved({"anytile": lambda: softmax_kernel[(R,)](osa, xsa, C, C, C, BLOCK=B),
                             "numpy": np_softmax,
                             "numba": (lambda: numba_softmax(xs, outs)) if numba else None},
                            rounds, rep)
        table.add("fused softmax fp32", f"{R}x{C}", times)

        # layer norm
        w = rng.standard_normal(C, dtype=np.float32)
        b = rng.standard_normal(C, dtype=np.float32)
        wa, ba = at.asarray(w, device=dev), at.asarray(b, device=dev)
        yl = at.asarray(np.full((R, C), np.nan, np.float32), device=dev)
        layernorm_kernel[(R,)](xsa, yl, wa, ba, C, C, 1e-5, BLOCK=B)
        refl = ((x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
                * w + b)
        check("layernorm", yl.numpy(), refl, 1e-3)

        def np_layernorm():
            np.mean(xs, axis=1, keepdims=True, out=row_tmp)
            np.subtract(xs, row_tmp, out=tmp)
            np.multiply(tmp, tmp, out=outs)
            np.mean(outs, axis=1, keepdims=True, out=row_tmp)
            np.add(row_tmp, 1e-5, out=row_tmp)
            np.sqrt(row_tmp, out=row_tmp)
            np.divide(tmp, row_tmp, out=tmp)
            np.multiply(tmp, w, out=tmp)
            np.add(tmp, b, out=outs)
        np_layernorm()
        check("numpy layernorm", outs, refl, 1e-3)
        times = interleaved({"anytile": lambda: layernorm_kernel[(R,)](xsa, yl, wa, ba, C, C, 1e-5,
                                                                       BLOCK=B),
                             "numpy": np_layernorm,
                             "numba": (lambda: numba_layernorm(xs, w, b, 1e-5, outs)) if numba
                             else None},
                            rounds, rep)
        table.add("layer norm fp32", f"{R}x{C}", times)

    if "matmul" in only:
        # matmul: the GPU benchmarks' 128x128x32 tiles, and the cpu's own (what a user tuning for
        # this cpu picks: the best of 128/256 x 128/256 x 32/64 on Zen 5, 2 cores; a core's
        # 1 MiB L2 holds a 256x256 fp32 accumulator, and bigger tiles read A and B fewer times)
        for S in ((512,) if args.quick else (1024, 2048)):
            a = rng.standard_normal((S, S), dtype=np.float32)
            bm = rng.standard_normal((S, S), dtype=np.float32)
            c = np.full((S, S), np.nan, np.float32)
            aa, bb, cc = (at.asarray(v, device=dev) for v in (a, bm, c))
            ref = a.astype(np.float64) @ bm
            for BM, BN, BK in ((128, 128, 32), (256, 256, 32)):
                g = (S // BM, S // BN)
                cc.numpy()[...] = np.nan
                matmul_kernel[g](aa, bb, cc, S, S, S, S, S, S, BM=BM, BN=BN, BK=BK)
                check("matmul", cc.numpy(), ref, 1e-2 * np.sqrt(S))
                peers = {"numpy": lambda: np.matmul(a, bm, out=c)}
                if numba:
                    cn = np.full((S, S), np.nan, np.float32)
                    numba_matmul(a, bm, cn)
                    check("numba matmul", cn, ref, 1e-2 * np.sqrt(S))
                    peers["numba"] = lambda: numba_matmul(a, bm, cn)
                times = interleaved({"anytile": lambda: matmul_kernel[g](
                    aa, bb, cc, S, S, S, S, S, S, BM=BM, BN=BN, BK=BK), **peers},
                    max(3, rounds - 2), 3)
                table.add(f"matmul fp32, {BM}x{BN}x{BK} tiles", f"{S}^3", times)
        table.notes.append("matmul: 128x128x32 are the GPU benchmarks' tiles, 256x256x32 the cpu's "
                           "(best of 128/256 x 128/256 x 32/64 here)")

        # bf16 inputs, f32 accumulation (AVX-512 BF16's vdpbf16ps where the cpu has it).  NumPy has
        # no bf16 matmul: its peer is np.matmul on float32 copies of the same values
        if ml_dtypes is not None:
            for S in ((512,) if args.quick else (1024, 2048)):
                a = rng.standard_normal((S, S), dtype=np.float32).astype(ml_dtypes.bfloat16)
                bm = rng.standard_normal((S, S), dtype=np.float32).astype(ml_dtypes.bfloat16)
                a32, b32 = a.astype(np.float32), bm.astype(np.float32)
                c = np.full((S, S), np.nan, np.float32)
                aa, bb, cc = (at.asarray(v, device=dev) for v in (a, bm, c))
                BM, BN, BK = 256, 256, 32
                g = (S // BM, S // BN)
                matmul_kernel[g](aa, bb, cc, S, S, S, S, S, S, BM=BM, BN=BN, BK=BK)
                check("bf16 matmul", cc.numpy(), a32.astype(np.float64) @ b32, 1e-2 * np.sqrt(S))
                times = interleaved({"anytile": lambda: matmul_kernel[g](
                    aa, bb, cc, S, S, S, S, S, S, BM=BM, BN=BN, BK=BK),
                    "numpy": lambda: np.matmul(a32, b32, out=c)}, max(3, rounds - 2), 3)
                table.add(f"matmul bf16 -> fp32, {BM}x{BN}x{BK} tiles", f"{S}^3", times)
            table.notes.append("matmul bf16: NumPy has no bf16 matmul; its column is np.matmul on "
                               "float32 copies of the same bf16 values (OpenBLAS sgemm)")

    if "launch" in only:
        # compile time of a new kernel (cold: a fresh JITFunction, no cache), and launch overhead
        n = 1 << 20
        xa = at.asarray(rng.standard_normal(n, dtype=np.float32), device=dev)
        src_fn = add_kernel.fn
        t0 = time.perf_counter()
        fresh = at.jit(src_fn)
        fresh.warmup(xa, xa, xa, n, BLOCK=1024, grid=(1,))
        t_compile = time.perf_counter() - t0
        nb_compile = None
        if numba:
            small = np.ones(16, np.float32)
            t0 = time.perf_counter()
            njit(parallel=True)(numba_add.py_func)(small, small, small)
            nb_compile = time.perf_counter() - t0
        print(f"compile, new vector-add kernel: anytile {t_compile * 1e3:.0f} ms, "
              f"numba {nb_compile * 1e3 if nb_compile else float('nan'):.0f} ms")
        table.notes.append(f"compile, new vector-add kernel (cold, no cache): anytile "
                           f"{t_compile * 1e3:.0f} ms, numba "
                           f"{f'{nb_compile * 1e3:.0f} ms' if nb_compile else 'n/a'}")
        tiny_np, tiny_out = np.ones(16, np.float32), np.empty(16, np.float32)
        tiny = at.asarray(tiny_np, device=dev)
        tiny_at = at.asarray(tiny_out, device=dev)
        add_kernel[(1,)](tiny, tiny, tiny_at, 16, BLOCK=16)

        def per_call(fn):
            return lambda: [fn() for _ in range(100)]
        launches = {"anytile": per_call(lambda: add_kernel[(1,)](tiny, tiny, tiny_at, 16,
                                                                 BLOCK=16)),
                    "numpy": per_call(lambda: np.add(tiny_np, tiny_np, out=tiny_out))}
        if numba:
            launches["numba"] = per_call(lambda: numba_add(tiny_np, tiny_np, tiny_out))
        times = interleaved(launches, rounds, rep)
        table.add("launch, 16 elements", "grid (1,)",
                  {k: [t / 100 for t in v] for k, v in times.items()})

    machine = platform.processor() or platform.machine()
    header = (f"CPU benchmarks, {datetime.date.today()}, {machine} "
              f"({dev.info.description}), {os.cpu_count()} cores, numpy {np.__version__}, "
              f"numba {numba.__version__ if numba else 'not installed'}; {rounds} interleaved "
              f"rounds, ratio = peer time / anytile time (> 1: anytile faster), median (range)")
    text = table.markdown(header)
    print("\n" + text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
