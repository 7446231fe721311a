"""The pool that runs multi-program launches (``launch._pool()``): on Linux the native pool
(``native_pool.NativePool``), else the Python one.  Each program runs exactly once, with
launches from several Python threads at once, with failing checks, after a cancelled
(Ctrl-C) launch and in a forked child; the Python pool, the fallback, still works."""
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.errors import DeviceAssertError, LaunchError
from anytile_cpu import launch as cpu_launch
from anytile_cpu import native_pool

linux_only = pytest.mark.skipif(native_pool.native_pool_support() is not None,
                                reason=str(native_pool.native_pool_support()))


def _count_programs(counts_ptr):
    tl.atomic_add(counts_ptr + tl.program_id(0), 1)


def _spin(out_ptr, started_ptr, rounds, steps):
    tl.store(started_ptr + tl.program_id(0), 1)
    acc = tl.program_id(0).to(tl.float32)
    for r in range(rounds):
        for i in range(steps):
            acc = acc * 0.999 + 1.0
    tl.store(out_ptr + tl.program_id(0), acc)


def _assert_below(x_ptr, limit):
    x = tl.load(x_ptr + tl.program_id(0))
    tl.device_assert(x < limit, "x must be below the limit")


@pytest.fixture
def dev():
    return at.device("cpu")


def _loaded(kernel):
    return next(iter(kernel._plans.values())).loaded


def _on_the_pool(kernel, grid, *args):
    """Launch with the pool (as if the programs had been slow: never the caller alone)."""
    kernel[grid](*args)
    _loaded(kernel).program_seconds = math.inf


@linux_only
def test_linux_uses_the_native_pool():
    assert isinstance(cpu_launch._pool(), native_pool.NativePool)
    assert cpu_launch.pool_fallback is None
    assert cpu_launch._pool().size == max(1, cpu_launch.cpu_count() - 1)


@pytest.mark.parametrize("programs", [2, 3, 5, 64, 1000, 4099])
def test_each_program_runs_once_on_the_pool(dev, programs):
    kernel = at.jit(_count_programs)
    counts = np.zeros(programs, np.int32)
    ca = at.asarray(counts, device=dev)
    before = cpu_launch.launch_counts["pool"]
    for _ in range(10):
        _on_the_pool(kernel, (programs,), ca)
    assert cpu_launch.launch_counts["pool"] == before + 10
    np.testing.assert_array_equal(counts, 10)


def test_launches_from_several_python_threads_at_once(dev):
    """Each thread's launches wait for the pool in turn; none sees another's programs."""
    kernel = at.jit(_count_programs)
    sizes = [3, 17, 256, 1001, 4099, 64]
    arrays = [np.zeros(n, np.int32) for n in sizes]
    kernel[(2,)](at.asarray(np.zeros(2, np.int32), device=dev))   # compiled before the race
    failures = []
    start = threading.Barrier(len(sizes))

    def launch(counts):
        try:
            ca = at.asarray(counts, device=dev)
            start.wait()
            for _ in range(50):
                kernel[(counts.size,)](ca)
                for plan in list(kernel._plans.values()):
                    plan.loaded.program_seconds = math.inf      # keep them on the pool
        except BaseException as e:  # noqa: BLE001 -- reported below
            failures.append(e)
    threads = [threading.Thread(target=launch, args=(a,)) for a in arrays]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    for counts in arrays:
        np.testing.assert_array_equal(counts, 50)


@pytest.mark.parametrize("debug", [False, True])
def test_a_failed_check_in_one_program_of_a_pool_launch(dev, debug):
    """The error word stops the launch; the error names the check; the pool goes on."""
    kernel = at.jit(_assert_below, debug=debug)
    x = np.zeros(512, np.float32)
    xa = at.asarray(x, device=dev)
    _on_the_pool(kernel, (512,), xa, 1.0)
    x[300] = 5.0
    for _ in range(3):
        with pytest.raises((DeviceAssertError, LaunchError), match="below the limit"):
            kernel[(512,)](xa, 1.0)
        _loaded(kernel).program_seconds = math.inf
    x[300] = 0.0
    kernel[(512,)](xa, 1.0)                      # a clean launch after the failures
    counts = np.zeros(700, np.int32)
    _on_the_pool(at.jit(_count_programs), (700,), at.asarray(counts, device=dev))
    np.testing.assert_array_equal(counts, 1)


def test_failures_and_clean_launches_from_several_threads(dev):
    kernel = at.jit(_assert_below)
    kernel[(2,)](at.asarray(np.zeros(2, np.float32), device=dev), 1.0)
    outcomes = {}

    def launch(i):
        x = np.zeros(300, np.float32)
        if i % 2:
            x[i * 7] = 9.0
        xa = at.asarray(x, device=dev)
        raised = 0
        for _ in range(30):
            try:
                kernel[(300,)](xa, 1.0)
            except DeviceAssertError:
                raised += 1
            for plan in list(kernel._plans.values()):
                plan.loaded.program_seconds = math.inf
        outcomes[i] = raised
    threads = [threading.Thread(target=launch, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == {i: 30 if i % 2 else 0 for i in range(6)}


POOL_CTRL_C = textwrap.dedent("""
    import json, math, signal, sys, threading
    import numpy as np
    import anytile as at
    sys.path.insert(0, sys.argv[1])
    import test_native_pool as t

    dev = at.device("cpu")
    kernel = at.jit(t._spin)
    programs = 64
    out = np.full(programs, np.nan, np.float32)
    started = np.zeros(programs, np.int32)
    oa, sa = at.asarray(out, device=dev), at.asarray(started, device=dev)
    kernel[(2,)](oa, sa, 2, 2)                 # the long launch's specialisation, warm
    t._loaded(kernel).program_seconds = math.inf
    out[:] = np.nan
    started[:] = 0
    main = threading.main_thread().ident

    def interrupt_once_started():
        while not started.any():
            threading.Event().wait(0.001)          # polls memory the programs write
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt_once_started, daemon=True).start()
    try:
        kernel[(programs,)](oa, sa, 10, 2_000_000_000)     # a minute or more a program
        outcome = "finished"
    except KeyboardInterrupt:
        outcome = "interrupted"
    counts = np.zeros(999, np.int32)
    t._on_the_pool(at.jit(t._count_programs), (999,), at.asarray(counts, device=dev))
    print(json.dumps({"outcome": outcome, "started": started.tolist(),
                      "written": (~np.isnan(out)).tolist(), "counts": counts.tolist()}))
""")


def test_ctrl_c_cancels_a_pool_launch_and_the_pool_goes_on(tmp_path):
    """SIGINT during a long launch (sent once a program has started, never after a delay):
    KeyboardInterrupt once the threads have stopped inside their programs (programs were
    left, none finished), and the next launch is whole.  In a process of its own: signal
    handlers are process-wide, and other tests put theirs in front of Python's."""
    script = tmp_path / "pool_ctrl_c.py"
    script.write_text(POOL_CTRL_C)
    env = {k: v for k, v in os.environ.items() if k != "ANYTILE_DEVICE"}
    proc = subprocess.Popen([sys.executable, str(script), str(Path(__file__).parent)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=300)    # a hang guard: uncancelled, hours
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["outcome"] == "interrupted"
    assert not all(result["started"]) and not any(result["written"])   # stopped inside
    assert result["counts"] == [1] * 999


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_launches_on_a_pool_of_its_own(dev):
    kernel = at.jit(_count_programs)
    counts = np.zeros(333, np.int32)
    ca = at.asarray(counts, device=dev)
    _on_the_pool(kernel, (333,), ca)                 # the parent's pool is running
    with warnings.catch_warnings():                  # 3.12+: "multi-threaded, fork()..."
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:                                     # the child: its own threads
        code = 1
        try:
            kernel[(333,)](ca)
            code = 0 if (counts == 2).all() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    np.testing.assert_array_equal(counts, 1)        # the child's memory was its own


def test_the_python_pool_still_runs_launches(dev, monkeypatch):
    """``ProgramPool``, the pool where the native one cannot run, claims programs too."""
    monkeypatch.setattr(cpu_launch, "_POOL", cpu_launch.ProgramPool(2))
    kernel = at.jit(_count_programs)
    for programs in (2, 3, 1000):
        counts = np.zeros(programs, np.int32)
        ca = at.asarray(counts, device=dev)
        for _ in range(5):
            _on_the_pool(kernel, (programs,), ca)
        np.testing.assert_array_equal(counts, 5)
        kernel._plans.clear()
        kernel._fast_cache.clear()
    x = np.zeros(100, np.float32)
    x[42] = 3.0
    failing = at.jit(_assert_below)
    with pytest.raises(DeviceAssertError):
        failing[(100,)](at.asarray(x, device=dev), 1.0)


def test_native_pool_support_names_a_reason_off_linux(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert "Linux" in native_pool.native_pool_support()
