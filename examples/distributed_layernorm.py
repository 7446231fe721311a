"""Layer norm with its features split across ranks (tensor parallelism): anytile kernels do
each rank's work and torch.distributed combines the ranks (NCCL on GPUs, gloo on CPUs).

    torchrun --nproc-per-node 2 examples/distributed_layernorm.py        # a GPU per rank, NCCL
    torchrun --nproc-per-node 2 examples/distributed_layernorm.py --cpu  # CPUs, gloo
    python examples/distributed_layernorm.py                             # one process

Rank r of W holds columns [r*N/W, (r+1)*N/W) of x (rows x N), of the weight and of the bias.
An anytile kernel sums its shard of each row (sum and sum of squares, in fp32); one
``all_reduce`` adds the ranks' sums; a second anytile kernel normalises the shard with the
global mean and rstd; ``all_gather`` puts y together on every rank.  The kernels get torch
tensors: on ``cuda:<local rank>`` they run on that GPU, on torch's current stream there, so
they are ordered with the collectives; on CPU tensors they run on anytile's cpu backend in
place.  Every rank makes the whole input from one seed, so rank 0 checks y against one
process's result (the same kernels over whole rows, and NumPy in float64); ``--save F.npy``
writes y to compare runs.  Needs torch (it is not a dependency of anytile).
"""
import argparse
import os

import numpy as np

import anytile as at
import anytile.language as tl


@at.jit
def partial_moments(x_ptr, sums_ptr, stride, n_cols, BLOCK: tl.constexpr):
    """sums[row] = (sum of x[row, :n_cols], sum of its squares), in fp32."""
    row = tl.program_id(0)
    total = tl.zeros([BLOCK], tl.float32)
    squares = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        total += x
        squares += x * x
    tl.store(sums_ptr + row * 2, tl.sum(total, axis=0))
    tl.store(sums_ptr + row * 2 + 1, tl.sum(squares, axis=0))


@at.jit
def normalise(x_ptr, y_ptr, w_ptr, b_ptr, sums_ptr, stride, n_cols, n_total, eps,
              BLOCK: tl.constexpr):
    """y[row, cols] = (x - mean) * rstd * w + b, with the row's mean and rstd from the sums
    of every rank; program (row, block) does BLOCK columns."""
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    mean = tl.load(sums_ptr + row * 2) / n_total
    var = tl.load(sums_ptr + row * 2 + 1) / n_total - mean * mean
    rstd = 1.0 / tl.sqrt(tl.maximum(var, 0.0) + eps)
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, (x - mean) * rstd * w + b, mask=mask)


def layernorm_shard(torch, x, w, b, n_total, eps=1e-5, all_reduce=None):
    """y for this rank's columns ``x`` (rows x n_local); ``all_reduce`` sums a tensor over
    the ranks in place (``None``: one process holds every column)."""
    rows, n_local = x.shape
    sums = torch.empty((rows, 2), dtype=torch.float32, device=x.device)
    partial_moments[(rows,)](x, sums, x.stride(0), n_local, BLOCK=1024)
    if all_reduce is not None:
        all_reduce(sums)
    y = torch.empty_like(x)
    block = 1024
    normalise[(rows, at.cdiv(n_local, block))](x, y, w, b, sums, x.stride(0), n_local, n_total,
                                               eps, BLOCK=block)
    return y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="CPU tensors and gloo, even with GPUs")
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=8192)
    parser.add_argument("--save", help="write y (rank 0) to this .npy file")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    on_gpu = not args.cpu and torch.cuda.is_available()
    if on_gpu:
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if on_gpu else "gloo", device_id=device if on_gpu else None)
    if args.cols % world:
        raise SystemExit(f"--cols {args.cols} must split evenly over {world} ranks")

    rng = np.random.default_rng(2026)          # every rank makes the same whole input
    x_all = rng.standard_normal((args.rows, args.cols)).astype(np.float32) * 3 + 1
    w_all = rng.standard_normal(args.cols).astype(np.float32)
    b_all = rng.standard_normal(args.cols).astype(np.float32)
    share = args.cols // world
    part = slice(rank * share, (rank + 1) * share)
    x = torch.from_numpy(np.ascontiguousarray(x_all[:, part])).to(device)
    w = torch.from_numpy(w_all[part].copy()).to(device)
    b = torch.from_numpy(b_all[part].copy()).to(device)

    y = layernorm_shard(torch, x, w, b, args.cols,
                        all_reduce=dist.all_reduce if world > 1 else None)
    if world > 1:
        pieces = [torch.empty_like(y) for _ in range(world)]
        dist.all_gather(pieces, y)
        y_all = torch.cat(pieces, dim=1)
    else:
        y_all = y
    y_all = y_all.cpu().numpy()

    if rank == 0:
        whole = [torch.from_numpy(a).to(device) for a in (x_all, w_all, b_all)]
        one_process = layernorm_shard(torch, *whole, args.cols).cpu().numpy()
        x64 = x_all.astype(np.float64)
        ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
        ref = ref * w_all + b_all
        vs_one = float(np.max(np.abs(y_all - one_process)))
        vs_numpy = float(np.max(np.abs(y_all - ref)))
        where = f"{world} rank(s) on {'GPUs, NCCL' if on_gpu else 'CPUs, gloo'}" if world > 1 \
            else f"one process on {device}"
        print(f"distributed layer norm {args.rows}x{args.cols}, {where}: max |y - one process| "
              f"{vs_one:.1e}, max |y - NumPy float64| {vs_numpy:.1e}")
        if args.save:
            np.save(args.save, y_all)
        if vs_one > 1e-4 or vs_numpy > 1e-4:
            raise SystemExit("MISMATCH")
        print("OK")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
