"""The first call of a brand-new kernel, each case in a fresh process (torch imported and a
CUDA tensor made first; ``import anytile`` timed apart): anytile with an empty on-disk cache,
anytile again with that cache warm, Triton with an empty cache; then a cProfile of a cold
anytile call.  Run: python3 benchmarks/gpu_cold_profile.py"""
import json
import os
import subprocess
import sys
import tempfile

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
