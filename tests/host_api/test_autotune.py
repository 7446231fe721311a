"""``at.autotune``, ``at.heuristics`` and ``at.Config`` with Triton's meaning, on the cpu backend:
the fastest config wins, the choice is cached per tuning key and on disk (a reordered config
list keeps it), reset_to_zero / restore_value keep tuning from changing the result, and the
hooks run.  Which config is fastest is said by a timer the test controls (``ModelTimer``): a
real one answers as the machine's load allows."""
import json

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


class ModelTimer:
    """The autotuner's ``do_bench`` for tests: runs each timed launch once (so hooks,
    reset_to_zero and restore_value act as in real tuning) and reports its config's ``SLOW``
    as its milliseconds, the order an idle machine would give.  ``pre_hook`` must be the
    tuned kernel's pre_hook: it tells which config is launched."""

    def __init__(self):
        self.launched = []          # SLOW of each launch the tuner made

    def pre_hook(self, args):
        self.launched.append(args["SLOW"])

    def __call__(self, fn, quantiles):
        fn()
        return [float(self.launched[-1])] * len(quantiles)


def _tuned(timer, **options):
    return at.autotune(configs=[SLOW, FAST], key=["n"], do_bench=timer,
                       pre_hook=timer.pre_hook, **options)(accumulate)


def test_the_fastest_config_wins_and_is_kept_per_key(cpu):
    timer = ModelTimer()
    kernel = _tuned(timer, reset_to_zero=["out_ptr"])
    x = at.asarray(np.ones(4096, np.float32), device=cpu)
    out = at.zeros(4096, np.float32, device=cpu)
    grid = lambda meta: (at.cdiv(4096, meta["BLOCK"]),)  # noqa: E731
    kernel[grid](x, out, 4096)
    assert kernel.best_config is FAST and sorted(timer.launched) == [1, 4000]
    assert set(kernel.configs_timings) == {SLOW, FAST}
    assert kernel.configs_timings[FAST][0] < kernel.configs_timings[SLOW][0]
    # reset_to_zero zeroed `out` before every timed run; the real launch adds x once more
    np.testing.assert_array_equal(out.numpy(), np.ones(4096, np.float32))
    kernel[grid](x, out, 4096)
    assert len(kernel.cache) == 1 and sorted(timer.launched) == [1, 4000]  # no second tuning
    kernel[grid](x, out, 2048)
    assert len(kernel.cache) == 2 and sorted(timer.launched) == [1, 1, 4000, 4000]  # a new key


def test_restore_value_keeps_tuning_from_changing_the_result(cpu):
    kernel = _tuned(ModelTimer(), restore_value=["out_ptr"])
    x = at.asarray(np.ones(512, np.float32), device=cpu)
    start = np.arange(512, dtype=np.float32)
    out = at.asarray(start.copy(), device=cpu)
    kernel[(1,)](x, out, 512)
    np.testing.assert_array_equal(out.numpy(), start + 1)


def test_choices_are_kept_on_disk_across_a_reordered_config_list(cpu, tmp_path, monkeypatch):
    monkeypatch.setenv("ANYTILE_CACHE_DIR", str(tmp_path))
    x = at.asarray(np.ones(256, np.float32), device=cpu)
    out = at.zeros(256, np.float32, device=cpu)
    first = _tuned(ModelTimer(), cache_results=True, reset_to_zero=["out_ptr"])
    first[(1,)](x, out, 256)
    assert first.configs_timings is not None and first.best_config is FAST
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
        reset_to_zero=["out_ptr"], do_bench=lambda fn, quantiles: fn() or [1.0] * 3)(accumulate)
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
    timer = ModelTimer()
    kernel = at.autotune(configs=[at.Config({"SLOW": 3000}), at.Config({"SLOW": 1})], key=["n"],
                         reset_to_zero=["out_ptr"], do_bench=timer, pre_hook=timer.pre_hook)(
        at.heuristics({"BLOCK": lambda args: at.next_power_of_2(args["n"])})(accumulate))
    x = at.asarray(np.ones(300, np.float32), device=cpu)
    out = at.zeros(300, np.float32, device=cpu)
    kernel[(1,)](x, out, 300)
    assert kernel.best_config.kwargs == {"SLOW": 1}
    np.testing.assert_array_equal(out.numpy(), np.ones(300, np.float32))


def _anytile_frames(exc):
    """The traceback's frames after the test's own: anytile's, that the user would see."""
    import traceback
    return [f.filename for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]


def _launch(kernel, n=64, **options):
    x = np.random.default_rng(n).random(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    kernel[(1,)](x, out, n, **options)
    return x, out


KERNEL_AT = rf"'accumulate' \({__file__}:\d+\)"


@pytest.mark.parametrize("configs, options, message", [
    ([], {"SLOW": 1}, r"no value for 'BLOCK': the launch does not pass it and configs=\[\] sets "
                      r"nothing"),
    ([at.Config({"SLOW": 1, "BLOCK": 64}), at.Config({"SLOW": 1})], {},
     r"no value for 'BLOCK': the launch does not pass it and configs\[1\] \(\{SLOW: 1\}\) does "
     r"not set it"),
    ([at.Config({"SLOW": 1, "BLOK": 64}), at.Config({"SLOW": 2, "BLOCK": 64})], {},
     r"no value for .BLOCK.: .* configs\[0\] \(\{SLOW: 1, BLOK: 64\}\) does not set it "
     r"\(.BLOK.: no parameter"),
])
def test_configs_that_leave_a_constexpr_unset_are_clear_errors(cpu, configs, options, message):
    kernel = at.autotune(configs=configs, key=["n"], warmup=1, rep=1)(accumulate)
    with pytest.raises(at.LaunchArgumentError, match=f"autotuning {KERNEL_AT}: {message}") as info:
        _launch(kernel, **options)
    assert len(_anytile_frames(info.value)) == 1


def test_empty_configs_launch_with_the_launchs_values_as_triton_does(cpu):
    kernel = at.autotune(configs=[], key=["n"])(accumulate)
    x, out = _launch(kernel, SLOW=1, BLOCK=64)
    np.testing.assert_array_equal(out, np.float32(np.nan) + x)      # out += x over NaN
    out = np.zeros(64, np.float32)
    kernel[(1,)](x, out, 64, SLOW=1, BLOCK=64)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("prune, message", [
    ({"early_config_prune": lambda configs, named, **kw: []},
     "early_config_prune kept none of the 2 configs"),
    ({"perf_model": lambda **kw: 1.0, "top_k": 0},
     "prune_configs_by.s top_k must be a positive int"),
])
def test_pruning_every_config_is_a_clear_error(cpu, prune, message):
    kernel = at.autotune(configs=[SLOW, FAST], key=["n"], prune_configs_by=prune)(accumulate)
    with pytest.raises(at.LaunchValueError, match=f"autotuning {KERNEL_AT}: {message}") as info:
        _launch(kernel)
    assert len(_anytile_frames(info.value)) == 1


def test_a_key_or_configs_of_the_wrong_kind_are_refused_when_decorating():
    with pytest.raises(at.LaunchArgumentError, match=rf"{KERNEL_AT}: key must be a list of "
                                                     r"parameter names, got 'n'"):
        at.autotune(configs=[FAST], key="n")(accumulate)
    with pytest.raises(at.LaunchArgumentError, match=r"configs\[1\] is a dict, not an at.Config"):
        at.autotune(configs=[FAST, {"SLOW": 1}], key=["n"])(accumulate)


@pytest.mark.parametrize("damage", ["[" * 100000, b"\xff\xfe\x00garbage", '{"config": 5}'])
def test_a_damaged_choice_file_is_ignored_and_written_over(cpu, tmp_path, monkeypatch, damage):
    monkeypatch.setenv("ANYTILE_CACHE_DIR", str(tmp_path))

    def tuned():
        return at.autotune(configs=[SLOW, FAST], key=["n"], cache_results=True,
                           do_bench=lambda fn, quantiles: [1.0] * 3)(accumulate)
    _launch(tuned())
    (choice,) = (tmp_path / "autotune").glob("accumulate-*.json")
    if isinstance(damage, bytes):
        choice.write_bytes(damage)
    else:
        choice.write_text(damage)
    for _ in range(2):                  # tuned again, then read back
        kernel = tuned()
        x, out = _launch(kernel)
        np.testing.assert_array_equal(out, np.float32(np.nan) + x)
    assert kernel.configs_timings is None and kernel.best_config is SLOW
    assert json.loads(choice.read_text())["config"] == SLOW._identity()
    assert [p.name for p in (tmp_path / "autotune").iterdir()] == [choice.name]


def test_a_full_disk_leaves_no_temporary_file(cpu, tmp_path, monkeypatch):
    """A choice or a compiled kernel that cannot be written is only not kept: the launch goes
    on and nothing half-written stays behind."""
    import errno
    import os
    from anytile.runtime import cache
    monkeypatch.setenv("ANYTILE_CACHE_DIR", str(tmp_path))

    class FullDisk:
        """A file opened for writing on a full disk: the first write fails part way."""

        def __init__(self, file):
            self.file = file

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, text):
            self.file.write(text[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

    def on_a_full_disk(opener, *, where):
        def opened(target, mode="r", *args, **kwargs):
            file = opener(target, mode, *args, **kwargs)
            writing = "w" in mode and (isinstance(target, int) or str(target).startswith(where))
            return FullDisk(file) if writing else file
        return opened
    import builtins
    monkeypatch.setattr(cache.os, "fdopen", on_a_full_disk(os.fdopen, where=str(tmp_path)))
    monkeypatch.setattr(builtins, "open", on_a_full_disk(builtins.open, where=str(tmp_path)))
    kernel = at.autotune(configs=[SLOW, FAST], key=["n"], cache_results=True,
                         do_bench=lambda fn, quantiles: [1.0] * 3)(accumulate)
    x, out = _launch(kernel, n=128)
    np.testing.assert_array_equal(out, np.float32(np.nan) + x)
    assert not cache.store_entry(tmp_path, "ab" * 32, {"ir": "x"}, {})
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
