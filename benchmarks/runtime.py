"""Host-side costs of the runtime: launch overhead of a tiny kernel and the first call of a new
kernel, on one device, optionally beside another checkout of anytile in the same run.

    .venv/bin/python benchmarks/runtime.py --device cpu:0
    .venv/bin/python benchmarks/runtime.py --device cpu:0 --against /tmp/anytile-before --rounds 5

With ``--against DIR`` every round runs both checkouts in fresh processes, alternating (``DIR``
is another checkout of this repository, e.g. ``git worktree add /tmp/anytile-before HEAD~3``);
the table gives each side's range over the rounds and the ratio of medians.  The other checkout
is imported by putting its ``core`` and backend folders first on ``PYTHONPATH``; the installed
entry points are the same for both.

Rows: ``launch, at.Array`` (a 16-element add with ``at.Array`` arguments, microseconds per
launch, median of batches), ``launch, foreign`` (the same with the device's native arrays:
NumPy on host devices, torch tensors on ``cuda``), ``first call`` (a kernel from a new file, no
disk cache, seconds, including compile and load)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

FRESH_SOURCE = '''
import anytile as at
import anytile.language as tl


@at.jit
def fresh_add_{tag}(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 3.0 * tl.load(y_ptr + offs, mask=mask),
             mask=mask)
'''


def _load_fresh(directory: Path, tag: str):
    path = directory / f"fresh_{tag}.py"
    path.write_text(FRESH_SOURCE.format(tag=tag))
    namespace = {"__name__": f"fresh_{tag}", "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace[f"fresh_add_{tag}"]


def _sync(dev) -> None:
    dev.backend.synchronize(dev.info)


def measure(device_name: str, launches: int) -> dict:
    """One process's measurements (run with ``--child``)."""
    import numpy as np
    import anytile as at

    dev = at.device(device_name)
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ANYTILE_CACHE_DIR"] = tmp + "/cache"
        fn = _load_fresh(Path(tmp), f"{os.getpid()}_{time.time_ns() % 10**9}")
        host = np.random.default_rng(0).random(4096).astype(np.float32)
        x = at.asarray(host, device=dev)
        out = at.empty_like(x)
        _sync(dev)
        started = time.perf_counter()
        fn[(4,)](x, x, out, 4096, BLOCK=1024)
        _sync(dev)
        results["first call"] = time.perf_counter() - started
        if not np.allclose(out.numpy(), 4 * host, rtol=1e-6):
            raise SystemExit("first call gave a wrong result")

    small = at.asarray(np.arange(16, dtype=np.float32), device=dev)
    small_out = at.empty_like(small)
    results["launch, at.Array"] = _per_launch(dev, lambda: fn[(1,)](small, small, small_out, 16, BLOCK=16),
                                              launches)
    if not np.array_equal(small_out.numpy(), 4 * np.arange(16, dtype=np.float32)):
        raise SystemExit("launch gave a wrong result")
    foreign = _foreign_arrays(dev)
    if foreign is not None:
        a, o = foreign
        results["launch, foreign"] = _per_launch(dev, lambda: fn[(1,)](a, a, o, 16, BLOCK=16), launches)
    return results


def _foreign_arrays(dev):
    import numpy as np
    if dev.backend.host_memory:
        return np.arange(16, dtype=np.float32), np.empty(16, np.float32)
    try:
        import torch
    except ImportError:
        return None
    if dev.name.startswith("cuda"):
        x = torch.arange(16, dtype=torch.float32, device=dev.name)
        return x, torch.empty_like(x)
    return None


def _per_launch(dev, launch, count: int) -> float:
    for _ in range(200):
        launch()
    _sync(dev)
    batches = []
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(count):
            launch()
        _sync(dev)
        batches.append((time.perf_counter() - started) / count * 1e6)
    return statistics.median(batches)


def _child(checkout: Path, device: str, launches: int) -> dict:
    env = dict(os.environ)
    if checkout != ROOT:
        paths = [checkout / "core"] + sorted(p.parent for p in checkout.glob("backends/*/pyproject.toml"))
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    code = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import runtime; "
            f"print(json.dumps(runtime.measure({device!r}, {launches})))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=str(checkout))
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu:0")
    parser.add_argument("--against", type=Path, help="another checkout, measured in the same run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--launches", type=int, default=2000)
    args = parser.parse_args()
    sides = {"this checkout": ROOT}
    if args.against is not None:
        sides = {"other": args.against.resolve(), "this checkout": ROOT}
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    for _ in range(args.rounds):
        for side, checkout in sides.items():
            runs[side].append(_child(checkout, args.device, args.launches))
    rows = list(runs["this checkout"][0])
    head = "| row | unit | " + " | ".join(sides) + (" | this / other (medians) |" if len(sides) > 1 else "")
    print(f"device {args.device}, {args.rounds} rounds, {args.launches} launches a batch")
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for row in rows:
        unit = "s" if row == "first call" else "us"
        cells, medians = [], []
        for side in sides:
            values = [r[row] for r in runs[side] if row in r]
            medians.append(statistics.median(values))
            fmt = "{:.3f}" if unit == "s" else "{:.2f}"
            cells.append(f"{fmt.format(min(values))}-{fmt.format(max(values))}")
        ratio = f" | {medians[-1] / medians[0]:.2f}" if len(sides) > 1 else ""
        print(f"| {row} | {unit} | " + " | ".join(cells) + ratio + " |")


if __name__ == "__main__":
    main()
