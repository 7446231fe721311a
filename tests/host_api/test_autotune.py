"""``at.autotune``, ``at.heuristics`` and ``at.Config`` with Triton's meaning, on the cpu backend
(a real timer): the fastest config wins, the choice is cached per tuning key and on disk (a
reordered config list keeps it), reset_to_zero / restore_value keep tuning from changing the
result, and the hooks run."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


@pytest.fixture
def cpu():
    if "cpu" not in [d.type for d in at.devices()]:
        pytest.skip("the cpu backend is not usable here")
    return at.device("cpu")


@at.jit
def accumulate(x_ptr, out_ptr, n, SLOW: tl.constexpr, BLOCK: tl.constexpr):
    """out += x (read-modify-write, so tuning runs would add up without reset/restore); a
    SLOW config repeats the work many times over."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    acc = tl.zeros((BLOCK,), tl.float32)
    for _ in range(SLOW):
        acc = acc * 0.5 + x
    acc = acc * 0.0 + x
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask) + acc, mask=mask)


FAST = at.Config({"SLOW": 1, "BLOCK": 1024}, num_warps=4)
SLOW = at.Config({"SLOW": 4000, "BLOCK": 1024}, num_warps=4)


def _tuned(**options):
    return at.autotune(configs=[SLOW, FAST], key=["n"], **options)(accumulate)


def test_the_fastest_config_wins_and_is_kept_per_key(cpu):
    kernel = _tuned(reset_to_zero=["out_ptr"], warmup=1, rep=5)
    x = at.asarray(np.ones(4096, np.float32), device=cpu)
    out = at.zeros(4096, np.float32, device=cpu)
    grid = lambda meta: (at.cdiv(4096, meta["BLOCK"]),)  # noqa: E731
    kernel[grid](x, out, 4096)
    assert kernel.best_config is FAST
    assert set(kernel.configs_timings) == {SLOW, FAST}
    assert kernel.configs_timings[FAST][0] < kernel.configs_timings[SLOW][0]
    # reset_to_zero zeroed `out` before every timed run; the real launch adds x once more
    np.testing.assert_array_equal(out.numpy(), np.ones(4096, np.float32))
    kernel[grid](x, out, 4096)
    assert kernel.configs_timings is not None and len(kernel.cache) == 1   # no second tuning
    kernel[grid](x, out, 2048)
    assert len(kernel.cache) == 2                                          # a new key tunes


def test_restore_value_keeps_tuning_from_changing_the_result(cpu):
    kernel = _tuned(restore_value=["out_ptr"], warmup=1, rep=3)
    x = at.asarray(np.ones(512, np.float32), device=cpu)
    start = np.arange(512, dtype=np.float32)
    out = at.asarray(start.copy(), device=cpu)
    kernel[(1,)](x, out, 512)
    np.testing.assert_array_equal(out.numpy(), start + 1)


def test_choices_are_kept_on_disk_across_a_reordered_config_list(cpu, tmp_path, monkeypatch):
    monkeypatch.setenv("ANYTILE_CACHE_DIR", str(tmp_path))
    x = at.asarray(np.ones(256, np.float32), device=cpu)
    out = at.zeros(256, np.float32, device=cpu)
    first = at.autotune(configs=[SLOW, FAST], key=["n"], cache_results=True,
                        reset_to_zero=["out_ptr"], warmup=1, rep=3)(accumulate)
    first[(1,)](x, out, 256)
    assert first.configs_timings is not None
    timed = []
    again = at.autotune(configs=[FAST, SLOW], key=["n"], cache_results=True,
                        reset_to_zero=["out_ptr"],
                        do_bench=lambda fn, quantiles: timed.append(fn) or [1.0] * 3)(accumulate)
    again[(1,)](x, out, 256)
    assert again.best_config is FAST and timed == [] and again.configs_timings is None
    assert list((tmp_path / "autotune").glob("accumulate-*.json"))


def test_pruning_and_hooks(cpu):
    seen = []
    kernel = at.autotune(
        configs=[SLOW, FAST, at.Config({"SLOW": 2, "BLOCK": 512})], key=["n"],
        prune_configs_by={"early_config_prune": lambda configs, named, **kw:
                          [c for c in configs if c.kwargs["BLOCK"] == 1024]},
        pre_hook=lambda args: seen.append(("pre", args["SLOW"])),
        post_hook=lambda args, exception: seen.append(("post", exception)),
        reset_to_zero=["out_ptr"], warmup=1, rep=2)(accumulate)
    x = at.asarray(np.ones(1024, np.float32), device=cpu)
    out = at.zeros(1024, np.float32, device=cpu)
    kernel[(1,)](x, out, 1024)
    assert set(kernel.configs_timings) == {SLOW, FAST}
    assert ("pre", 4000) in seen and ("post", None) in seen


def test_unknown_names_and_tuned_arguments_are_clear_errors():
    with pytest.raises(at.LaunchArgumentError, match=r"\['m'\] are not parameters"):
        at.autotune(configs=[FAST], key=["n"], reset_to_zero=["m"])(accumulate)
    # a key naming no parameter is left out of the key, as Triton does, with a warning
    with pytest.warns(UserWarning, match=r"key \['m'\] names no parameter"):
        at.autotune(configs=[FAST], key=["n", "m"])(accumulate)
    kernel = at.autotune(configs=[FAST, SLOW], key=["n"])(accumulate)
    x = np.ones(16, np.float32)
    with pytest.raises(at.LaunchArgumentError, match=r"autotuned over \['BLOCK'\]"):
        kernel[(1,)](x, x, 16, BLOCK=16)


def test_heuristics_compute_meta_parameters(device, poison):
    kernel = at.heuristics({"BLOCK": lambda args: at.next_power_of_2(args["n"]),
                            "SLOW": lambda args: 1})(accumulate)
    x = at.asarray(np.arange(100, dtype=np.float32), device=device)
    out = at.zeros(100, np.float32, device=device)
    kernel[(1,)](x, out, 100)
    np.testing.assert_array_equal(out.numpy(), np.arange(100, dtype=np.float32))


def test_heuristics_under_autotune(cpu):
    kernel = at.autotune(configs=[at.Config({"SLOW": 1}), at.Config({"SLOW": 3000})], key=["n"],
                         reset_to_zero=["out_ptr"], warmup=1, rep=2)(
        at.heuristics({"BLOCK": lambda args: at.next_power_of_2(args["n"])})(accumulate))
    x = at.asarray(np.ones(300, np.float32), device=cpu)
    out = at.zeros(300, np.float32, device=cpu)
    kernel[(1,)](x, out, 300)
    assert kernel.best_config.kwargs == {"SLOW": 1}
    np.testing.assert_array_equal(out.numpy(), np.ones(300, np.float32))
