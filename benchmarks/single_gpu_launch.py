import time, torch, anytile as at
from anytile_conformance.catalogue.kernels import vector_add_kernel
x, y, o = (torch.ones(16, device="cuda:0") for _ in range(3))
vector_add_kernel[(1,)](x, y, o, 16, BLOCK=16)
def us(run, reps=2000):
    best = 1e9
    for _ in range(5):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(reps): run()
        torch.cuda.synchronize(); best = min(best, (time.perf_counter() - t0) / reps * 1e6)
    return best
a = us(lambda: vector_add_kernel[(1,)](x, y, o, 16, BLOCK=16)); t = us(lambda: torch.add(x, y, out=o))
print(f"one visible GPU: tiny launch anytile {a:.2f} us, torch.add(out=) {t:.2f} us, torch/anytile {t/a:.2f}x")
