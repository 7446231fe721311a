"""Device facts as target strings, the layout policy, and OpenCL C literals (no device)."""
import math

import numpy as np
import pytest

from anytile.ir import bf16, f16, f32, f64, i1, i8, i32, i64, u64
from anytile_opencl.codegen.ctypes import literal, vector_literal
from anytile_opencl.layout import LayoutPolicy
from anytile_opencl.target import GENERIC_ARCHES, OpenCLArch


def test_arch_strings_round_trip():
    for text in GENERIC_ARCHES:
        assert str(OpenCLArch.parse(text)) == text
    arch = OpenCLArch.parse("gpu-s32-v4-l48k-g1024+fp64+a64")
    assert (arch.kind, arch.simd, arch.vector, arch.local_bytes, arch.max_group) == \
        ("gpu", 32, 4, 48 * 1024, 1024)
    assert arch.fp64 and arch.atomics64 and not arch.atomics64_ext


@pytest.mark.parametrize("bad", ["gpu", "tpu-s32-v4-l48k-g1024", "gpu-s32-v3-l48k-g1024",
                                 "gpu-s32-v4-l48k-g1024+fp128"])
def test_bad_arch_strings_say_what_is_expected(bad):
    with pytest.raises(ValueError, match="OpenCL|vector|kind"):
        OpenCLArch.parse(bad)


def test_work_items_per_program():
    cpu = OpenCLArch.parse("cpu-s1-v16-l64k-g4096")
    gpu = OpenCLArch.parse("gpu-s32-v4-l48k-g256")
    assert cpu.work_items(8) == 1
    assert gpu.work_items(1) == 32 and gpu.work_items(4) == 128
    assert gpu.work_items(16) == 256          # the device's largest work-group


def test_blocked_layout_covers_every_element_once():
    policy = LayoutPolicy(work_items=128, vector=4)
    for numel in (1, 2, 8, 64, 512, 4096):
        lay = policy.layout(numel)
        assert lay.vector * lay.owners * lay.chunks == numel
        assert lay.owners <= 128 and lay.vector <= 4
        seen = sorted((k * lay.owners + t) * lay.vector + j for t in range(lay.owners)
                      for k in range(lay.chunks) for j in range(lay.vector))
        assert seen == list(range(numel))
    assert policy.layout(4096).chunks == 8 and not policy.layout(4096).replicated
    assert policy.layout(64).replicated and policy.layout(64).owners == 16


def test_literals_are_exact():
    assert literal(0.1, f32) == f"({float(np.float32(0.1)).hex()}f)"
    assert literal(0.1, f64) == f"({(0.1).hex()})"
    assert literal(-0.0, f32) == "(-0.0f)"
    assert literal(math.inf, f32) == "((float)INFINITY)" and "NAN" in literal(math.nan, f64)
    assert literal(1.0, f16) == "((ushort)15360)"
    assert literal(1.0, bf16) == "((ushort)16256)"
    assert literal(-(1 << 31), i32) == "(-2147483647 - 1)"
    assert literal(-(1 << 63), i64) == "(-9223372036854775807L - 1L)"
    assert literal((1 << 64) - 1, u64) == "18446744073709551615UL"
    assert literal(300, i8) == "((char)44)" and literal(True, i1) == "((char)1)"
    assert vector_literal([0, 1, 2, 3], i32) == "((int4)(0, 1, 2, 3))"
