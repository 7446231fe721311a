"""AMD's matrix instructions as data: the fragment maps against AMD's published register
layouts, the placements core derives from them, the intrinsics each architecture's table
emits, and dots run from every table on the host simulator against NumPy."""
import dataclasses

import ml_dtypes
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.backend import CompileOptions
from anytile.codegen.gpu import acc_layout, check_instr, geometry, gpu_stages
from anytile.codegen.gpu.dot import DotSelector
from anytile.codegen.gpu.layouts import BlockedLayout
from anytile.codegen.gpu.simulator import simulate_kernel
from anytile.ir import ops
from anytile.ir.nodes import walk
from anytile_amd.archs import KNOWN_ARCHS
from anytile_amd.matrix import CDNA2_INSTRS, CDNA3_INSTRS, RDNA3_INSTRS, RDNA4_INSTRS
from anytile_amd.simulated import simulated_amd_target
from anytile_amd.stages import amdgcn_stage
from anytile_amd.target import AmdTarget
from anytile_conformance.catalogue.dot import dot_kernel

#: Entries of AMD's published layouts (the AMD Matrix Instruction Calculator, ``-M`` for the
#: A, B and D matrices), written out by hand: (lane, element) -> (row, column) of A[i][k],
#: B[k][j] and D[i][j].  Element e of a lane is the calculator's e-th column: register
#: e // pack, bits (e % pack) * element_bits and up.  Instructions with one layout share a row.
PUBLISHED = {
    # 32x32, four operand elements a lane (CDNA2 and CDNA3 f16/bf16, CDNA2 i8)
    ("v_mfma_f32_32x32x8f16", "v_mfma_f32_32x32x8bf16_1k", "v_mfma_i32_32x32x8i8",
     "v_mfma_f32_32x32x8_f16", "v_mfma_f32_32x32x8_bf16"): {
        "A": {(0, 0): (0, 0), (5, 1): (5, 1), (17, 1): (17, 1), (38, 0): (6, 4), (63, 3): (31, 7)},
        "B": {(0, 0): (0, 0), (5, 1): (1, 5), (17, 1): (1, 17), (38, 0): (4, 6), (63, 3): (7, 31)},
        "D": {(0, 0): (0, 0), (5, 1): (1, 5), (17, 1): (1, 17), (38, 0): (4, 6), (63, 1): (5, 31),
              (63, 15): (31, 31)}},
    ("v_mfma_f32_16x16x16f16", "v_mfma_f32_16x16x16bf16_1k", "v_mfma_i32_16x16x16i8",
     "v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16_bf16"): {
        "A": {(0, 0): (0, 0), (5, 1): (5, 1), (17, 1): (1, 5), (38, 0): (6, 8), (63, 3): (15, 15)},
        "B": {(0, 0): (0, 0), (5, 1): (1, 5), (17, 1): (5, 1), (38, 0): (8, 6), (63, 3): (15, 15)},
        "D": {(0, 0): (0, 0), (5, 1): (1, 5), (17, 1): (5, 1), (38, 0): (8, 6), (63, 1): (13, 15)}},
    ("v_mfma_f32_32x32x2f32", "v_mfma_f32_32x32x2_f32"): {
        "A": {(0, 0): (0, 0), (5, 0): (5, 0), (17, 0): (17, 0), (38, 0): (6, 1), (63, 0): (31, 1)},
        "B": {(0, 0): (0, 0), (5, 0): (0, 5), (17, 0): (0, 17), (38, 0): (1, 6), (63, 0): (1, 31)},
        "D": {(5, 1): (1, 5), (38, 0): (4, 6), (63, 15): (31, 31)}},
    ("v_mfma_f32_16x16x4f32", "v_mfma_f32_16x16x4_f32"): {
        "A": {(0, 0): (0, 0), (5, 0): (5, 0), (17, 0): (1, 1), (38, 0): (6, 2), (63, 0): (15, 3)},
        "B": {(0, 0): (0, 0), (5, 0): (0, 5), (17, 0): (1, 1), (38, 0): (2, 6), (63, 0): (3, 15)},
        "D": {(17, 1): (5, 1), (38, 0): (8, 6), (63, 3): (15, 15)}},
    ("v_mfma_f32_32x32x4_xf32",): {
        "A": {(0, 0): (0, 0), (5, 1): (5, 1), (17, 1): (17, 1), (38, 0): (6, 2), (63, 1): (31, 3)},
        "B": {(0, 0): (0, 0), (5, 1): (1, 5), (17, 1): (1, 17), (38, 0): (2, 6), (63, 1): (3, 31)},
        "D": {(17, 1): (1, 17), (38, 0): (4, 6), (63, 15): (31, 31)}},
    ("v_mfma_f32_16x16x8_xf32",): {
        "A": {(0, 0): (0, 0), (5, 1): (5, 1), (17, 1): (1, 3), (38, 0): (6, 4), (63, 1): (15, 7)},
        "B": {(0, 0): (0, 0), (5, 1): (1, 5), (17, 1): (3, 1), (38, 0): (4, 6), (63, 1): (7, 15)},
        "D": {(17, 1): (5, 1), (38, 0): (8, 6), (63, 1): (13, 15)}},
    ("v_mfma_i32_32x32x16_i8",): {
        "A": {(0, 0): (0, 0), (5, 1): (5, 1), (17, 1): (17, 1), (38, 0): (6, 8), (63, 7): (31, 15)},
        "B": {(0, 0): (0, 0), (5, 1): (1, 5), (17, 1): (1, 17), (38, 0): (8, 6), (63, 7): (15, 31)},
        "D": {(5, 1): (1, 5), (38, 0): (4, 6), (63, 15): (31, 31)}},
    ("v_mfma_i32_16x16x32_i8",): {
        "A": {(0, 0): (0, 0), (5, 1): (5, 1), (17, 1): (1, 9), (38, 0): (6, 16), (63, 7): (15, 31)},
        "B": {(0, 0): (0, 0), (5, 1): (1, 5), (17, 1): (9, 1), (38, 0): (16, 6), (63, 7): (31, 15)},
        "D": {(17, 1): (5, 1), (38, 0): (8, 6), (63, 3): (15, 15)}},
    # RDNA3, wave32: A and B repeated in both halves of the wave, D in every other row
    ("rdna3", "v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16", "v_wmma_i32_16x16x16_iu8"): {
        "A": {(0, 0): (0, 0), (7, 8): (7, 8), (16, 1): (0, 1), (29, 1): (13, 1), (29, 15): (13, 15)},
        "B": {(0, 0): (0, 0), (7, 8): (8, 7), (16, 1): (1, 0), (29, 1): (1, 13), (29, 15): (15, 13)},
        "D": {(0, 0): (0, 0), (7, 4): (8, 7), (16, 1): (3, 0), (29, 1): (3, 13), (29, 7): (15, 13)}},
    # RDNA4, wave32: each element held once
    ("rdna4", "v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16"): {
        "A": {(0, 0): (0, 0), (7, 4): (7, 8), (16, 1): (0, 5), (29, 1): (13, 5), (29, 7): (13, 15)},
        "B": {(0, 0): (0, 0), (7, 4): (8, 7), (16, 1): (5, 0), (29, 1): (5, 13), (29, 7): (15, 13)},
        "D": {(0, 0): (0, 0), (7, 4): (4, 7), (16, 1): (9, 0), (29, 1): (9, 13), (29, 7): (15, 13)}},
    ("rdna4", "v_wmma_i32_16x16x16_iu8"): {
        "A": {(0, 0): (0, 0), (7, 4): (7, 4), (16, 1): (0, 9), (29, 1): (13, 9), (29, 7): (13, 15)},
        "B": {(0, 0): (0, 0), (7, 4): (4, 7), (16, 1): (9, 0), (29, 1): (9, 13), (29, 7): (15, 13)},
        "D": {(7, 4): (4, 7), (16, 1): (9, 0), (29, 7): (15, 13)}},
}

TABLES = {"cdna2": CDNA2_INSTRS, "cdna3": CDNA3_INSTRS, "rdna3": RDNA3_INSTRS, "rdna4": RDNA4_INSTRS}
ALL = [(family, instr) for family, table in TABLES.items() for instr in table]


def _published(family, instr):
    found = [entries for names, entries in PUBLISHED.items()
             if instr.name in names and (names[0] not in TABLES or names[0] == family)]
    assert len(found) == 1, f"{family} {instr.name}: {len(found)} published layouts"
    return found[0]


@pytest.mark.parametrize("family,instr", ALL, ids=lambda v: str(v))
def test_maps_are_the_published_layouts(family, instr):
    entries = _published(family, instr)
    for operand, elem in (("A", instr.a_elem), ("B", instr.b_elem), ("D", instr.acc_elem)):
        for (lane, e), where in entries[operand].items():
            assert elem(lane, e) == where, (operand, lane, e)


@pytest.mark.parametrize("family,instr", ALL, ids=lambda v: str(v))
def test_maps_are_placements_covering_each_tile(family, instr):
    check_instr(instr)
    for elem, count, shape, replicas in ((instr.a_elem, instr.a_count, (instr.m, instr.k), instr.a_replicas),
                                         (instr.b_elem, instr.b_count, (instr.k, instr.n), instr.b_replicas),
                                         (instr.acc_elem, instr.acc_count, (instr.m, instr.n), 1)):
        held = sorted(elem(lane, i) for lane in range(instr.lanes) for i in range(count))
        assert held == sorted([(x, y) for x in range(shape[0]) for y in range(shape[1])] * replicas)


def test_derived_accumulator_layouts():
    mfma32, mfma16 = CDNA3_INSTRS[2], CDNA3_INSTRS[3]
    assert acc_layout(mfma32, (2, 2)) == BlockedLayout((4, 1), (2, 32), (2, 2), (1, 0))
    assert geometry(mfma32).reps == (4, 1)
    assert acc_layout(mfma16, (1, 4)) == BlockedLayout((4, 1), (4, 16), (1, 4), (1, 0))
    assert acc_layout(RDNA3_INSTRS[0], (2, 1)) == BlockedLayout((1, 1), (2, 16), (2, 1), (1, 0))
    assert geometry(RDNA3_INSTRS[0]).reps == (8, 1)
    assert acc_layout(RDNA4_INSTRS[0], (2, 2)) == BlockedLayout((8, 1), (2, 16), (2, 2), (1, 0))


def test_each_architecture_has_its_instructions():
    names = {a: [i.name for i in arch.matrix_instrs] for a, arch in KNOWN_ARCHS.items()}
    assert names["gfx90a"][0] == "v_mfma_f32_32x32x8f16"
    assert [n for n in names["gfx942"] if "xf32" in n] == ["v_mfma_f32_32x32x4_xf32",
                                                            "v_mfma_f32_16x16x8_xf32"]
    assert not [n for n in names["gfx950"] + names["gfx90a"] if "xf32" in n]
    assert set(names["gfx950"]) < set(names["gfx942"])
    assert all(i.lanes == 64 for a in ("gfx90a", "gfx942", "gfx950") for i in KNOWN_ARCHS[a].matrix_instrs)
    assert KNOWN_ARCHS["gfx1100"].matrix_instrs == RDNA3_INSTRS
    assert KNOWN_ARCHS["gfx1201"].matrix_instrs == RDNA4_INSTRS
    for arch in KNOWN_ARCHS.values():
        assert {i.a_type for i in arch.matrix_instrs} >= {"f16", "bf16", "i8"}


_SIG = {"f16": "*fp16", "bf16": "*bf16", "f32": "*fp32", "tf32": "*fp32", "i8": "*i8"}
_NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "tf32": np.float32,
       "i8": np.int8}


def _dot_module(instr):
    """``dot_kernel`` of one instruction tile along M and N and at least two along K (``tl.dot``
    wants every dimension >= 16)."""
    m, n, k = instr.m, instr.n, max(2 * instr.k, 16)
    acc = tl.int32 if instr.acc_type == "i32" else tl.float32
    precision = "tf32" if instr.a_type == "tf32" else "ieee" if instr.a_type == "f32" else "default"
    sig = _SIG[instr.a_type]
    signature = {"a_ptr": sig, "b_ptr": sig, "c_ptr": "*" + ("i32" if acc == tl.int32 else "fp32"),
                 "out_ptr": "*" + ("i32" if acc == tl.int32 else "fp32")}
    module = at.compile(dot_kernel, target="interpreter:reference", signature=signature,
                        constexprs={"M": m, "N": n, "K": k, "PRECISION": precision, "ACC": acc}).module
    return module, (m, n, k)


def _unique_instrs():
    seen = {}
    for family, instr in ALL:
        seen.setdefault(id(instr), (family, instr))
    return list(seen.values())


@pytest.mark.parametrize("family,instr", _unique_instrs(), ids=lambda v: str(v))
def test_dots_run_from_each_table_on_the_simulator(rng, family, instr):
    """A dot whose only instruction is ``instr``: registers placed from the maps, the
    instruction executed from the maps, against NumPy (xf32 inputs rounded to 10 bits)."""
    arch = next(a for a in KNOWN_ARCHS.values() if instr in a.matrix_instrs)
    target = simulated_amd_target(dataclasses.replace(arch, matrix_instrs=(instr,)))
    module, (m, n, k) = _dot_module(instr)
    dot = next(op for op in walk(module.kernel.body) if isinstance(op, ops.DotOp))
    assert DotSelector(target, 1).plan(dot).instr is instr
    dtype = _NP[instr.a_type]
    if instr.a_type == "i8":
        a, b = (rng.integers(-128, 128, s).astype(np.int8) for s in ((m, k), (k, n)))
        c = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
        out = np.full((m, n), 77, np.int32)
    else:
        a, b = (rng.uniform(-2, 2, s).astype(dtype) for s in ((m, k), (k, n)))
        c = rng.uniform(-2, 2, (m, n)).astype(np.float32)
        out = np.full((m, n), np.nan, np.float32)
    simulate_kernel(module, (1,), [a, b, c, out], 1, target=target)
    if instr.a_type == "i8":
        np.testing.assert_array_equal(out, c + a.astype(np.int32) @ b.astype(np.int32))
        return

    def tf32(x):
        bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)
    ea, eb = (tf32(a), tf32(b)) if instr.a_type == "tf32" else (a, b)
    expected = c.astype(np.float64) + ea.astype(np.float64) @ eb.astype(np.float64)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", sorted(KNOWN_ARCHS))
def test_each_table_emits_its_intrinsics_for_its_architecture(arch):
    """Every instruction of an architecture's table, alone in the table, compiles for that
    architecture to its own mnemonic (an intrinsic the architecture lacks would abort LLVM)."""
    for instr in KNOWN_ARCHS[arch].matrix_instrs:
        target = AmdTarget(arch)
        target.matrix_instrs = (instr,)
        module, _ = _dot_module(instr)
        stages = gpu_stages(target, CompileOptions(num_warps=1, num_stages=1))
        metadata: dict = {}
        llir = stages[1].run(stages[0].run(module, metadata), metadata)
        assert f"@{instr.intrinsic}" in str(llir) or f'@"{instr.intrinsic}"' in str(llir)
        code = amdgcn_stage(KNOWN_ARCHS[arch], True)(llir, metadata)
        assert f"\t{instr.name} " in code.assembly, (arch, instr.name)
