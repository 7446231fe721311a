"""Where a tiny launch's time and a new kernel's first call go on an NVIDIA GPU.

    python3 benchmarks/gpu_launch.py [--only launch|first-call]

``launch``: a tiny kernel launched with torch tensors and with ``at.Array`` arguments (the
fast path), the NVIDIA raw launcher alone, a bare ``cuLaunchKernel`` (cuda.bindings and
ctypes), Triton and ``torch.add`` side by side (median of 5 rounds of 20000 launches), then a
cProfile of the torch-tensor case.  ``first-call``: a brand-new kernel, each case in a fresh
process (torch imported and a CUDA tensor made first; ``import anytile`` timed apart): anytile
with an empty on-disk cache, again with that cache warm, Triton likewise; then a cProfile of a
cold anytile call."""
import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import anytile as at
import anytile.language as tl


@at.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def per_launch(fn, count=20000, repeats=5):
    """Median over ``repeats`` rounds of ``count`` launches, in microseconds per launch."""
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(count):
            fn()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) / count * 1e6)
    return sorted(rounds)[len(rounds) // 2]


def launch_profile() -> None:
    """The launch table and a cProfile of launches with torch tensors."""
    x = torch.randn(16, device="cuda")
    out = torch.empty_like(x)
    dev = at.device("cuda:0")
    xa = at.asarray(np.random.rand(16).astype(np.float32), device=dev)
    oa = at.empty((16,), np.float32, device=dev)
    results = {}
    add[(1,)](x, x, out, 16, BLOCK=128)
    torch.cuda.synchronize()
    assert torch.equal(out, x + x), "anytile (torch tensors) computed a wrong result"
    results["anytile, torch tensors"] = per_launch(lambda: add[(1,)](x, x, out, 16, BLOCK=128))
    add[(1,)](xa, xa, oa, 16, BLOCK=128)
    assert np.array_equal(oa.numpy(), 2 * xa.numpy()), "anytile (at.Array) computed a wrong result"
    results["anytile, at.Array"] = per_launch(lambda: add[(1,)](xa, xa, oa, 16, BLOCK=128))
    print(f"fast-path entries: {len(add._fast_cache)} (expected 2)")
    compiled = add[(1,)](xa, xa, oa, 16, BLOCK=128)
    loaded = dev.backend.load(compiled, dev.info)
    raw = dev.backend.launcher(loaded, dev.info)
    if raw is not None:
        a = xa.data_ptr()
        results["NvidiaBackend.launcher alone"] = per_launch(lambda: raw(1, 1, 1, 0, None, a, a, a, 16))
        # the driver call alone, two ways: what the raw launcher's ctypes call is measured against
        import ctypes
        from cuda.bindings import driver as cu
        for slot, value in zip(loaded.slots, (a, a, a, 16)):
            slot.value = value
        threads = loaded.threads
        results["bare cuLaunchKernel, cuda.bindings"] = per_launch(lambda: cu.cuLaunchKernel(
            loaded.function, 1, 1, 1, threads, 1, 1, 0, 0, loaded.params_address, 0))
        bare = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
        function, params = ctypes.c_void_p(int(loaded.function)), ctypes.c_void_p(loaded.params_address)
        results["bare cuLaunchKernel, ctypes"] = per_launch(lambda: bare(
            function, 1, 1, 1, threads, 1, 1, 0, None, params, None))
    results["torch.add"] = per_launch(lambda: torch.add(x, x, out=out))
    try:
        import triton
        import triton.language as ttl

        @triton.jit
        def tr_add(x_ptr, y_ptr, out_ptr, n, BLOCK: ttl.constexpr):
            offs = ttl.arange(0, BLOCK)
            mask = offs < n
            ttl.store(out_ptr + offs, ttl.load(x_ptr + offs, mask=mask) + ttl.load(y_ptr + offs, mask=mask), mask=mask)
        results["Triton 3.6, torch tensors"] = per_launch(lambda: tr_add[(1,)](x, x, out, 16, BLOCK=128))
    except Exception as exc:  # noqa: BLE001
        print(f"triton: {type(exc).__name__}: {exc}")
    print("| launch of a tiny kernel from Python | us per launch (median of 5 x 20000) |")
    print("| --- | --- |")
    for name, value in results.items():
        print(f"| {name} | {value:.2f} |")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(3000):
        add[(1,)](x, x, out, 16, BLOCK=128)
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
    print(s.getvalue()[:3000])


CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
import torch
x = torch.randn(4096, device="cuda"); out = torch.empty_like(x); torch.cuda.synchronize()
t1 = time.perf_counter()
side, folder, tag, profile = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
if side == "anytile":
    import anytile as deco_mod, anytile.language as lang
else:
    import triton as deco_mod, triton.language as lang
t2 = time.perf_counter()
src = f"""
@deco_mod.jit
def fresh_add_{tag}(x_ptr, y_ptr, out_ptr, n, BLOCK: lang.constexpr):
    offs = lang.program_id(0) * BLOCK + lang.arange(0, BLOCK)
    mask = offs < n
    lang.store(out_ptr + offs, lang.load(x_ptr + offs, mask=mask) + 4.0 * lang.load(y_ptr + offs, mask=mask), mask=mask)
"""
path = f"{folder}/fresh_{side}_{tag}.py"
open(path, "w").write(src)
namespace = {"deco_mod": deco_mod, "lang": lang, "__name__": "fresh", "__file__": path}
exec(compile(src, path, "exec"), namespace)
kernel = namespace[f"fresh_add_{tag}"]
if profile:
    import cProfile, pstats, io
    pr = cProfile.Profile(); pr.enable()
t3 = time.perf_counter()
compiled = kernel[(4,)](x, x, out, 4096, BLOCK=1024)
torch.cuda.synchronize()
t4 = time.perf_counter()
assert torch.allclose(out, 5 * x), "wrong result"
facts = {"torch_init_s": t1 - t0, "import_s": t2 - t1, "first_call_s": t4 - t3}
if side == "anytile":
    facts["stage_times_s"] = compiled.metadata.get("stage_times_s")
    facts["cache_hit_s"] = compiled.metadata.get("cache_hit_s")
    facts["loaded_modules"] = sorted(m for m in sys.modules if m.startswith(("anytile", "cuda", "llvmlite", "stevedore")))[:60]
print("RESULT " + json.dumps(facts))
if profile:
    pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(40)
    print(s.getvalue()[:7000])
'''


def child(side: str, folder: str, tag: str, env: dict, profile: bool = False) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, side, folder, tag, "1" if profile else "0"],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        return {}
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    if profile:
        print(proc.stdout[-7000:])
    return json.loads(line[7:])


def first_call_profile() -> None:
    """The first-call table and a cProfile of a cold anytile call."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, ANYTILE_CACHE_DIR=f"{tmp}/anytile-cache",
                   TRITON_CACHE_DIR=f"{tmp}/triton-cache")
        env.pop("ANYTILE_NO_CACHE", None)
        # bytecode as a regular install has it (pip compiles installed packages; an editable
        # checkout writes __pycache__ on first import unless PYTHONDONTWRITEBYTECODE is set)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{root}/core/anytile",
                        f"{root}/backends/nvidia/anytile_nvidia"], env=env, capture_output=True)
        rows = {"anytile, new kernel, empty disk cache": child("anytile", tmp, "a1", env),
                "anytile, same kernel, new process, warm disk cache": child("anytile", tmp, "a1", env),
                "Triton 3.6, new kernel, empty cache": child("triton", tmp, "t1", env),
                "Triton 3.6, same kernel, new process, warm cache": child("triton", tmp, "t1", env)}
        print("| first call | s | import s | details |")
        print("| --- | --- | --- | --- |")
        for name, facts in rows.items():
            detail = {k: v for k, v in facts.items() if k in ("stage_times_s", "cache_hit_s")}
            print(f"| {name} | {facts.get('first_call_s', float('nan')):.3f} | "
                  f"{facts.get('import_s', float('nan')):.3f} | {json.dumps(detail)} |")
        print("modules loaded by the cold anytile call:", rows["anytile, new kernel, empty disk cache"].get("loaded_modules"))
        print("\ncProfile of a cold anytile first call (another new kernel):")
        child("anytile", tmp, "p1", env, profile=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=("launch", "first-call"))
    args = parser.parse_args()
    if args.only in (None, "launch"):
        launch_profile()
    if args.only in (None, "first-call"):
        first_call_profile()


if __name__ == "__main__":
    main()
