"""What a process around an OpenCL launch may do: fork a child after using OpenCL (a clear
error in the child, not a hang), and launch a kernel whose tiles do not fit a CPU driver's
thread stack (a clear error, not a crash).  Each runs in its own Python process, with a generous timeout as the hang guard."""
import os
import subprocess
import sys
import textwrap

import pytest

from ocl_kit import opencl_device

HANG_GUARD_S = 300


def _run(script: str, folder) -> subprocess.CompletedProcess:
    """``script`` run by a new Python from a file (``@at.jit`` reads the kernels' source),
    on the device's own code path."""
    path = folder / "scenario.py"
    path.write_text(textwrap.dedent(script))
    env = {k: v for k, v in os.environ.items() if k != "ANYTILE_OPENCL_ARCH"}
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, env=env)


def _cpu_device() -> bool:
    """Whether ``opencl:0`` is a CPU device (PoCL)."""
    from anytile_opencl import driver
    dev = opencl_device()
    return next(r for r in driver.discover_devices() if r.info.name == dev.name).arch.kind == "cpu"


INCREMENT = '''
    import os, signal, sys
    import numpy as np
    import anytile as at
    import anytile.language as tl

    @at.jit
    def increment_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)
'''


def test_a_child_forked_after_opencl_was_used_gets_a_clear_error(tmp_path):
    opencl_device()
    done = _run(INCREMENT + '''
    a = np.arange(16, dtype=np.float32)
    increment_kernel[(1,)](a, 16, BLOCK=16, device="opencl:0")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        signal.alarm(120)                 # hang guard: a hung child dies
        try:
            increment_kernel[(1,)](np.zeros(16, np.float32), 16, BLOCK=16, device="opencl:0")
            message = "no error"
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    print(os.read(read, 4096).decode(), "| child status", status)
    increment_kernel[(1,)](a, 16, BLOCK=16, device="opencl:0")     # the parent goes on
    print("parent", a[:3])
    ''', tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "BackendError" in done.stdout and "'spawn'" in done.stdout, done.stdout
    assert "child status 0" in done.stdout and "parent [2. 3. 4.]" in done.stdout, done.stdout


def test_tiles_larger_than_a_cpu_drivers_thread_stack_are_refused_clearly(tmp_path):
    if not _cpu_device():
        pytest.skip("GPU drivers keep tiles in registers and their own memory")
    from anytile_opencl.checked import thread_stack_bytes
    n = 1
    while 2 * 4 * n <= thread_stack_bytes() * 7 // 8:   # a scan keeps its source and result
        n *= 2
    if n > 1 << 24:
        pytest.skip("the thread stack here is too large for a test-sized tile")
    done = _run(f'''
    import numpy as np
    import anytile as at
    import anytile.language as tl

    @at.jit
    def scan_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), axis=0))

    for n in ({n // 4}, {n}):
        x = np.random.default_rng(1).integers(-3, 4, n).astype(np.float32)
        out = np.full(n, np.nan, np.float32)
        try:
            scan_kernel[(1,)](x, out, BLOCK=n, device="opencl:0")
            print(n, "ran", bool(np.array_equal(out, np.cumsum(x))))
        except at.LaunchError as exc:
            print(n, "refused:", exc)
    ''', tmp_path)
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr[-3000:]}"
    lines = done.stdout.splitlines()
    assert lines[0] == f"{n // 4} ran True", done.stdout
    assert lines[1].startswith(f"{n} refused:") and f"a tile of {n} f32 elements" in done.stdout \
        and "stack" in done.stdout, done.stdout
