"""The fuzzer: deterministic, well-defined kernels; the shrinker; a planted backend bug found,
shrunk and saved as a runnable reproducer."""
from __future__ import annotations

import importlib.util

import numpy as np

import anytile as at

from anytile_conformance.fuzz.campaign import fuzz_one, program_seed, run_campaign
from anytile_conformance.fuzz.execute import differs, run_program
from anytile_conformance.fuzz.generator import generate
from anytile_conformance.fuzz.shrink import dependency_cone, shrink

ALL_CAPS = frozenset({"fp16", "bf16", "fp64"})


def _ops(program) -> list[str]:
    return [s.op for s in program.stmts]


def test_generation_is_deterministic():
    a, b = generate(123, ALL_CAPS), generate(123, ALL_CAPS)
    assert a.source() == b.source()
    assert all((x.data == y.data).all() for x, y in zip(a.inputs, b.inputs))
    assert generate(124, ALL_CAPS).source() != a.source()


def test_generated_kernels_run_on_the_reference(interpreter):
    for seed in range(25):
        program = generate(program_seed(5, seed), ALL_CAPS)
        outcome = run_program(program, interpreter)
        assert isinstance(outcome, dict), f"seed {seed}: {outcome}\n{program.source()}"


def test_capabilities_limit_dtypes():
    for seed in range(20):
        source = generate(seed, frozenset()).source()
        assert "float16" not in source and "bfloat16" not in source and "float64" not in source


def test_shrinker_finds_planted_statement():
    # planted bug: any program computing an xor "fails"
    seed = next(s for s in range(500) if "xor" in _ops(generate(s, ALL_CAPS)))
    program = generate(seed, ALL_CAPS)
    xor_var = next(s.target.name for s in program.stmts if s.op == "xor")
    calls = []

    def still_fails(candidate):
        calls.append(candidate)
        return any(s.op == "xor" for s in candidate.stmts)

    small = shrink(program, still_fails, xor_var)
    assert _ops(small) == ["xor"] and small.outputs == [xor_var]
    assert len(small.stmts) < len(program.stmts) or len(program.stmts) == 1
    assert calls, "the predicate was never consulted"


def test_dependency_cone_keeps_only_what_is_needed():
    program = generate(99, ALL_CAPS)
    last = program.stmts[-1]
    cone = dependency_cone(program, [last.target.name])
    names = {s.target.name for s in cone.stmts} | {i.var.name for i in cone.inputs}
    for stmt in cone.stmts:
        assert set(stmt.args) <= names
    assert cone.stmts[-1] is last and cone.outputs == [last.target.name]


def test_planted_backend_bug_is_found_shrunk_and_saved(broken_device, interpreter, tmp_path):
    caps = frozenset(broken_device.backend.capabilities)
    seed = next(s for s in range(500) if "xor" in _ops(generate(s, caps))
                and differs(generate(s, caps), broken_device, interpreter) is not None)
    failure = fuzz_one(broken_device, interpreter, seed, caps, str(tmp_path))
    assert failure is not None and failure.statements_after <= failure.statements_before
    text = open(failure.path).read()
    assert "^" in text and f"seed {seed}" in text
    # the reproducer is a runnable module: import it and compare the two devices itself
    spec = importlib.util.spec_from_file_location("repro_under_test", failure.path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    broken, reference = module.run(broken_device), module.run(interpreter)
    assert any((a.view("u1") != b.view("u1")).any() for a, b in zip(broken, reference))


def test_campaign_exit_status(broken_device, interpreter, tmp_path, capsys):
    assert run_campaign(interpreter, 5, 11, str(tmp_path)) == 0
    assert "5 passed, 0 failed" in capsys.readouterr().out
    assert run_campaign(broken_device, 30, 11, str(tmp_path)) == 1
    out = capsys.readouterr().out
    assert "MISMATCH kernel" in out and "repro_seed" in out


def test_comparison_accepts_either_zero_sign_but_nothing_else():
    """2000-kernel run, seed 1, cpu (2026-11-22): 7 'mismatches' were all min/max of two
    opposite zeros, whose sign the IR leaves unspecified (as LLVM's minnum and C's fmin do);
    the comparison treats +0.0 and -0.0 as equal and still catches any other difference."""
    import numpy as np

    from anytile_conformance.fuzz.execute import compare_outcomes

    program = generate(program_seed(1, 1075), ALL_CAPS)
    name = program.stored()[0].name
    shape = (4,)
    for dtype in (np.float32, np.float64, np.float16):
        ref = {v.name: np.ones(shape, dtype) for v in program.stored()}
        got = {k: v.copy() for k, v in ref.items()}
        ref[name][1], got[name][1] = 0.0, -0.0
        assert compare_outcomes(program, ref, got) is None
        got[name][2] = 2.0
        difference = compare_outcomes(program, ref, got)
        assert difference is not None and name in str(difference)


def test_ctrl_c_ends_a_campaign_with_one_line(interpreter, tmp_path, capsys, monkeypatch):
    from anytile_conformance.fuzz import campaign

    calls = []

    def stops_at_the_third(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return None

    monkeypatch.setattr(campaign, "fuzz_one", stops_at_the_third)
    assert run_campaign(interpreter, 10, 11, str(tmp_path)) == 130
    err = capsys.readouterr().err
    assert err == "fuzz: INTERRUPTED after 2 of 10 kernels: 2 passed, 0 failed\n"


# -- parameters sharing memory ------------------------------------------------------------------
def _way(program) -> str:
    """How ``program``'s parameters share memory (see the generator's docstring)."""
    if program.overlapping():
        return "overlap"
    shares = sorted(program.shares.items())
    (a, sa), (b, sb) = shares
    if sa.offset != sb.offset:
        return "side_by_side"
    kinds = {a.split("_")[0], b.split("_")[0]}
    return {frozenset({"in"}): "twice", frozenset({"out"}): "same_output"}.get(
        frozenset(kinds), "in_place")


def _shared(count: int):
    programs = (generate(program_seed(3, i), ALL_CAPS) for i in range(count))
    return [p for p in programs if p.shares]


def test_generated_kernels_share_memory_in_every_way():
    shared = _shared(600)
    assert {_way(p) for p in shared} == {"twice", "in_place", "same_output", "side_by_side",
                                         "overlap"}
    for program in shared:
        assert not program.overlapping() or program.programs == 1
        layout = program.layout()
        assert layout.shared_groups() == ["g0"]
        if _way(program) == "twice":       # one array passed twice holds one set of values
            a, b = (program.input_named(name[3:]) for name in program.shares)
            assert (a.data.view("u1") == b.data.view("u1")).all()
        names = [name for name, _, _, _ in program.params()]
        assert sorted(names) == sorted(set(names)) and set(program.shares) <= set(names)


def test_shared_memory_kernels_run_on_the_reference(interpreter):
    for program in _shared(120)[:12]:
        outcome = run_program(program, interpreter)
        assert isinstance(outcome, dict), f"{outcome}\n{program.source()}"
        assert "memory g0" in outcome


def test_a_backend_copying_each_argument_is_caught(copying_device, interpreter, tmp_path):
    caps = frozenset(copying_device.backend.capabilities)
    failure = next(f for f in (fuzz_one(copying_device, interpreter, program_seed(3, i), caps,
                                        str(tmp_path), i) for i in range(200)) if f is not None)
    assert failure.statements_after <= failure.statements_before
    spec = importlib.util.spec_from_file_location("repro_shared", failure.path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.SHARED
    broken, reference = module.run(copying_device), module.run(interpreter)
    assert any((a.view("u1") != b.view("u1")).any() for a, b in zip(broken, reference))


# -- math functions over mixed magnitudes -------------------------------------------------------
def _math_programs(count: int):
    programs = (generate(program_seed(4, i), ALL_CAPS) for i in range(count))
    return [p for p in programs if any(s.target.math for s in p.stmts)]


def test_math_statements_mix_huge_and_tiny_arguments_in_one_tile():
    from anytile_conformance.fuzz.generator import MAGNITUDES, MATH_FUNCTIONS

    seen = set()
    for program in _math_programs(400):
        used = {a for s in program.stmts for a in s.args}
        for stmt in program.stmts:
            if not stmt.target.math:
                continue
            seen.add(stmt.target.math)
            assert stmt.target.name not in used        # a math result feeds nothing
            x = np.abs(program.input_named(stmt.args[0]).data.astype(np.float64))
            (tiny, _), _, (huge, _) = MAGNITUDES[stmt.target.dtype]
            if program.n >= 3 and stmt.target.math not in ("exp", "exp2"):
                assert x.max() >= huge and x.min() <= 1e-2, (stmt.target, x)
    assert seen == set(MATH_FUNCTIONS)


def test_math_results_are_compared_within_their_ulp_bound(interpreter):
    from anytile_conformance.fuzz.execute import compare_outcomes

    def loose(var):          # an f32 result allowed more than one ulp
        return var.dtype == "f32" and var.math not in ("sqrt", "floor", "ceil")

    program = next(p for p in _math_programs(400) if any(loose(s.target) for s in p.stmts))
    var = next(s.target for s in program.stmts if loose(s.target))
    reference = run_program(program, interpreter)
    nudged = {k: v.copy() for k, v in reference.items()}
    nudged[var.name][:program.n] = np.nextafter(nudged[var.name][:program.n], np.float32(np.inf))
    assert compare_outcomes(program, reference, nudged) is None     # 1 ulp: within the bound
    wrong = {k: v.copy() for k, v in reference.items()}
    lane = int(np.flatnonzero(np.isfinite(wrong[var.name][:program.n]))[0])
    wrong[var.name][lane] = wrong[var.name][lane] * np.float32(1.01) + np.float32(1e-3)
    difference = compare_outcomes(program, reference, wrong)
    assert difference is not None and var.name in difference.variables
    assert f"tl.{var.math}, mixed magnitudes): backend is beyond" in str(difference)
    assert f"ulp in 1 of {program.n} elements" in str(difference)


def test_a_wrong_math_function_is_caught(sin_is_cos_device, interpreter, tmp_path):
    caps = frozenset(sin_is_cos_device.backend.capabilities)
    seed = next(program_seed(4, i) for i in range(400)
                if any(s.target.math == "sin" for s in generate(program_seed(4, i), caps).stmts))
    failure = fuzz_one(sin_is_cos_device, interpreter, seed, caps, str(tmp_path))
    assert failure is not None and "tl.sin, mixed magnitudes): backend is beyond" in \
        str(failure.difference)
    text = open(failure.path).read()
    assert "tl.sin(" in text and "MATH = {" in text


def test_views_overlapping_at_a_shift_are_read_before_any_lane_writes(interpreter, monkeypatch):
    """On a GPU the lanes of one program run in no set order, and the host simulator runs them
    one after another: a kernel whose output view overlaps its input view at a shift needs a
    barrier between its loads and its stores.  Two programs of a campaign (seeds 20261131 and
    20261132) differed on the simulator without it."""
    from anytile.runtime.discovery import discover
    monkeypatch.setenv("ANYTILE_GPU_SIMULATOR", "1")
    discover(refresh=True)
    try:
        for device_name in ("gpusim:0", "amdsim32:0"):
            device = at.device(device_name)
            for seed, index in ((20261131, 79), (20261132, 162)):
                program = generate(program_seed(seed, index), device.backend.capabilities)
                assert program.overlapping() and program.programs == 1
                assert "tl.debug_barrier()" in program.source()
                assert differs(program, device, interpreter) is None, device_name
    finally:
        monkeypatch.delenv("ANYTILE_GPU_SIMULATOR")
        discover(refresh=True)
