import cProfile, pstats, time, io, sys, tempfile
t0 = time.perf_counter()
import torch
x = torch.randn(4096, device="cuda"); out = torch.empty_like(x); torch.cuda.synchronize()
t1 = time.perf_counter()
import anytile as at, anytile.language as tl  # noqa: F401  (timed: the import itself)
t2 = time.perf_counter()
src = '''
import anytile as at, anytile.language as tl  # noqa: F401  (timed: the import itself)
@at.jit
def fresh_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 4.0 * tl.load(y_ptr + offs, mask=mask), mask=mask)
'''
d = tempfile.mkdtemp(); open(f"{d}/fresh_mod.py", "w").write(src); sys.path.insert(0, d)
import fresh_mod
pr = cProfile.Profile(); pr.enable()
t3 = time.perf_counter()
fresh_mod.fresh_add[(4,)](x, x, out, 4096, BLOCK=1024); torch.cuda.synchronize()
t4 = time.perf_counter()
pr.disable()
print(f"torch init {t1-t0:.2f}s, import anytile {t2-t1:.2f}s, first call {t4-t3:.2f}s")
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(25); print(s.getvalue()[:6000])
