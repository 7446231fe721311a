"""What the TMA tests share: the emulated Hopper target, the descriptor records of a kernel's
maps, running a lowered kernel on the host simulator with them, and Triton's matmul loop."""
import ctypes

import anytile as at
import anytile.language as tl
import numpy as np
from anytile.backend import CompileOptions
from anytile.codegen.gpu import lay_out, lower_to_llvm
from anytile.codegen.gpu.simulator import SimulatedKernel
from anytile_nvidia import tma_sim
from anytile_nvidia.box_maps import BoxMap
from anytile_nvidia.tma_sim import EmulatedTensorCopies, host_map
from anytile_nvidia.warpgroup_sim import simulated_hopper_target


def tma_target(pointer_box_tile=1):
    """The emulated Hopper target; the boxes of pointer loads copied for dots of at least
    ``pointer_box_tile`` elements (the tests' small tiles too, by default)."""
    copies = EmulatedTensorCopies()
    copies.pointer_box_tile = pointer_box_tile
    return simulated_hopper_target(copies)


def box_maps(kernel):
    """The ``BoxMap``s a lowered kernel (``GpuKernel``) copies through, in the order of its
    last parameters."""
    return tuple(BoxMap.from_metadata(m) for m in kernel.metadata.get("box_maps", ()))


def map_records(maps, values):
    """The emulation's descriptor record of each map, from the launch's values of its leaves
    (the array's base, sizes and stride: parameter names, or numbers)."""
    def leaf(x):
        v = values[x] if isinstance(x, str) else x
        return v.ctypes.data if isinstance(v, np.ndarray) else int(v)
    return [host_map(m, *[leaf(x) for x in m.array[:4]]) for m in maps]


def lowered(fn, sig, consts, warps, stages=3, pointer_box_tile=1):
    """(the IR module, the ``GpuKernel``) of ``fn`` lowered for the emulated Hopper target."""
    module = at.compile(fn, target="nvidia:sm_90", signature=sig, constexprs=consts,
                        num_warps=warps).module
    target = tma_target(pointer_box_tile)
    options = CompileOptions(num_warps=warps, num_stages=stages)
    return module, lower_to_llvm(lay_out(module, target, options, {}), target, options, {})


def run(module, kernel, values, grid, warps):
    """Run the lowered ``kernel`` on the simulator with ``values`` by parameter name and the
    emulated descriptor records of its maps; no wait may have stalled."""
    fn = module.kernel
    records = map_records(box_maps(kernel), values)
    sim = Simulated(str(kernel), fn, warps * 32, len(records))
    del tma_sim.stalls[:]
    sim.run(grid, [values[x.name] for x in fn.args] + [ctypes.addressof(r) for r in records])
    assert not tma_sim.stalls, f"waits that never completed: {tma_sim.stalls}"


class Simulated(SimulatedKernel):
    """A simulated kernel whose last ``records`` parameters are the emulated maps (pointers)."""

    def __init__(self, llir, fn, threads, records):
        super().__init__(llir, fn.name, [a.type for a in fn.args], threads)
        self.argtypes = self.argtypes + [ctypes.c_void_p] * records
        address = self.engine.get_function_address(fn.name)
        self.fn = ctypes.CFUNCTYPE(None, *self.argtypes)(address)


@at.jit
def carried_matmul(a_ptr, b_ptr, c_ptr, K, sam, sbk, scm, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    # Triton's loop shape: pointer tiles carried through the loop and bumped each step
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK * sbk
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc)
