"""Cross-lane exchange: which moves each architecture gets (DPP, ``v_permlanex16``,
``ds_bpermute``, ``v_readlane``), the moves' lane mapping against the ISA's words, and
``shuffle_xor``/``shuffle_idx`` built from them run on the host simulator at waves of 64 and
32, every lane checked."""

import numpy as np
import pytest
from llvmlite import ir

from anytile.codegen.gpu.simulator import SimulatedKernel
from anytile.ir.types import PointerType, i32
from anytile_amd.archs import KNOWN_ARCHS, arch_of
from anytile_amd.exchange import (QUAD_PERM, ROW_HALF_MIRROR, ROW_MIRROR, ROW_ROR, ROW_XMASK,
                                  dpp_source_lane, xor_plan)
from anytile_amd.simulated import simulated_amd_target
from anytile_amd.target import AmdTarget

I32 = ir.IntType(32)


def test_the_dpp_controls_move_lanes_as_the_isa_says():
    # quad_perm:[a,b,c,d]: lane i of each group of four reads lane (sel[i]) of its group
    ctrl = QUAD_PERM | 2 | 3 << 2 | 0 << 4 | 1 << 6      # quad_perm:[2,3,0,1]
    assert [dpp_source_lane(ctrl, lane) for lane in range(8)] == [2, 3, 0, 1, 6, 7, 4, 5]
    # row_ror:n: rotate right by n within each row of 16: lane i reads lane (i - n) mod 16
    assert [dpp_source_lane(ROW_ROR + 3, lane) for lane in (0, 2, 3, 15, 16, 19)] == [13, 15, 0, 12, 29, 16]
    # row_mirror: lane i of a row reads lane 15 - i; row_half_mirror: 7 - i within each 8
    assert [dpp_source_lane(ROW_MIRROR, lane) for lane in (0, 5, 15, 16, 31)] == [15, 10, 0, 31, 16]
    assert [dpp_source_lane(ROW_HALF_MIRROR, lane) for lane in (0, 5, 8, 15, 17)] == [7, 2, 15, 8, 22]
    # row_xmask:m (GFX10+): lane i of a row reads lane i ^ m of the row
    assert [dpp_source_lane(ROW_XMASK + 5, lane) for lane in (0, 5, 16, 31)] == [5, 0, 21, 26]
    with pytest.raises(ValueError, match="0x142"):
        dpp_source_lane(0x142, 0)            # row_bcast15: not one the backend emits


@pytest.mark.parametrize("arch", sorted(KNOWN_ARCHS))
def test_each_architecture_gets_moves_it_has(arch):
    facts = KNOWN_ARCHS[arch]
    for mask in range(1, facts.wave_size):
        plan = xor_plan(facts, mask)
        for leaf, arg in plan:
            if leaf == "dpp" and arg >= ROW_XMASK:
                assert facts.generation >= 10, (mask, plan)      # row_xmask is GFX10+
            if leaf == "permlanex16":
                assert facts.generation >= 10 and facts.wave_size == 32
        # the composition is the xor, lane by lane
        for lane in range(facts.wave_size):
            src = lane
            for leaf, arg in reversed(plan):
                src = (dpp_source_lane(arg, src) if leaf == "dpp" else
                       src ^ 16 if leaf == "permlanex16" else src ^ arg)
            assert src == lane ^ mask, (mask, plan, lane)
    powers = {m: xor_plan(facts, m) for m in (1, 2, 4, 8, 16)}
    assert all(len(p) == 1 for m, p in powers.items() if m != 4 or facts.generation >= 10)
    assert powers[16] == ([("permlanex16", 0)] if facts.generation >= 10 else [("bpermute", 16)])


def test_masks_outside_the_wave_are_refused():
    with pytest.raises(ValueError, match="xor mask 32"):
        xor_plan(KNOWN_ARCHS["gfx1100"], 32)


def _exchange_kernel(target, ops):
    """``out[j * threads + tid] = ops[j](b, in[tid])``; returns the LLVM IR text."""
    module = ir.Module("k")
    module.triple = target.triple
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, I32]), "k")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    tid = target.thread_id(b)
    value = b.load(b.gep(fn.args[0], [tid], source_etype=I32), typ=I32)
    for j, op in enumerate(ops):
        slot = b.add(b.mul(ir.Constant(I32, j), fn.args[2]), tid)
        b.store(op(b, value), b.gep(fn.args[1], [slot], source_etype=I32))
    b.ret_void()
    return str(module)


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_shuffles_from_the_moves_on_the_simulator(arch, rng):
    """Every xor mask of the wave, and ``shuffle_idx`` by a computed lane (``ds_bpermute``)
    and by a constant one (``v_readlane``), two waves per program: lane by lane."""
    target = simulated_amd_target(arch)
    wave = target.warp_size
    threads = 2 * wave
    values = rng.integers(-2**31, 2**31, threads).astype(np.int32)
    lanes = np.arange(threads)

    def by_lane(b, v):
        lane = b.and_(b.mul(target.lane_id(b), ir.Constant(I32, 5)), ir.Constant(I32, wave - 1))
        return target.shuffle_idx(b, v, lane)
    ops = [lambda b, v, m=m: target.shuffle_xor(b, v, m) for m in range(1, wave)]
    ops += [by_lane, lambda b, v: target.shuffle_idx(b, v, ir.Constant(I32, 3))]
    kernel = SimulatedKernel(_exchange_kernel(target, ops), "k",
                             [PointerType(i32), PointerType(i32), i32], threads)
    out = np.full((len(ops), threads), -1, np.int32)
    kernel.run((1,), [values, out, threads])
    for mask in range(1, wave):
        np.testing.assert_array_equal(out[mask - 1], values[lanes ^ mask], err_msg=f"xor {mask}")
    base = lanes & ~(wave - 1)
    np.testing.assert_array_equal(out[-2], values[base | ((lanes % wave) * 5 % wave)])
    np.testing.assert_array_equal(out[-1], values[base | 3])


@pytest.mark.parametrize("arch,expect,absent", [
    ("gfx942", ["llvm.amdgcn.update.dpp.i32", "llvm.amdgcn.ds.bpermute"], ["permlanex16"]),
    ("gfx90a", ["llvm.amdgcn.update.dpp.i32", "llvm.amdgcn.ds.bpermute"], ["permlanex16"]),
    ("gfx1100", ["llvm.amdgcn.update.dpp.i32", "llvm.amdgcn.permlanex16.i32"], ["bpermute"]),
    ("gfx1201", ["llvm.amdgcn.update.dpp.i32", "llvm.amdgcn.permlanex16.i32"], ["bpermute"])])
def test_the_target_emits_the_moves_its_architecture_has(arch, expect, absent):
    target = AmdTarget(arch)
    masks = (1, 2, 4, 8, 16) + ((32,) if target.warp_size == 64 else ())
    text = _exchange_kernel(target, [lambda b, v, m=m: target.shuffle_xor(b, v, m) for m in masks])
    for name in expect:
        assert name in text
    for word in absent:
        assert word not in text
    readlane = _exchange_kernel(target, [lambda b, v: target.shuffle_idx(b, v, ir.Constant(I32, 7))])
    assert "llvm.amdgcn.readlane.i32" in readlane


def test_device_architecture_names():
    assert arch_of("gfx942:sramecc+:xnack-") is KNOWN_ARCHS["gfx942"]
    derived = arch_of("gfx1030")
    assert (derived.generation, derived.wave_size, derived.matrix_instrs) == (10, 32, ())
    assert arch_of("gfx908").wave_size == 64 and arch_of("gfx1151").features == "-real-true16"
    with pytest.raises(ValueError, match="not an AMD GPU architecture"):
        arch_of("sm_90")
