"""What a process around an OpenCL launch may do: fork a child after using OpenCL (a clear
error in the child, not a hang), press Ctrl-C while a launch runs (heard at once), and
launch a kernel whose tiles do not fit a CPU driver's thread stack (a clear error, not a
crash).  Each runs in its own Python process, with a generous timeout as the hang guard."""
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


def test_ctrl_c_interrupts_the_wait_for_a_running_kernel(tmp_path):
    """The kernel spins until the host writes a flag it reads in place (PoCL's buffers over
    host memory): SIGINT is sent once it has started and the host waits for it; the wait
    raises KeyboardInterrupt, then the flag lets the kernel end and the queue drains."""
    if not _cpu_device():
        pytest.skip("the kernel reads host memory in place only on a CPU device")
    done = _run('''
    import os, signal, threading, time
    import numpy as np
    import pyopencl as cl
    import anytile as at
    import anytile.language as tl
    from anytile.backend import Buffer
    from anytile.ir import i32
    from anytile_opencl import driver, waits

    @at.jit
    def spin_kernel(flag_ptr, out_ptr):
        tl.store(flag_ptr + 1, 1)                      # started
        n = 0
        while tl.load(flag_ptr, volatile=True) == 0:   # until the host says stop
            n += 1
        tl.store(out_ptr, n)

    dev = at.device("opencl:0")
    record = next(r for r in driver.discover_devices() if r.info.name == dev.name)
    raw = np.zeros(8192, np.uint8)
    flag = raw[(-raw.ctypes.data) % 4096:][:64].view(np.int32)
    handle = cl.Buffer(record.context, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR,
                       hostbuf=flag)
    flag_array = at.Array(Buffer(dev.info, 64, handle), (16,), i32, dev)
    out = at.asarray(np.full(1, -7, np.int32), device=dev)

    waiting = threading.Event()
    real_wait = waits.wait_for
    def spy(event):
        waiting.set()
        return real_wait(event)
    waits.wait_for = spy

    def interrupt():
        guard = time.monotonic() + 120               # hang guard only
        while (flag[1] == 0 or not waiting.is_set()) and time.monotonic() < guard:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
    spin_kernel[(1,)](flag_array, out)
    threading.Thread(target=interrupt, daemon=True).start()
    try:
        dev.synchronize()
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted, kernel started:", int(flag[1]))
    flag[0] = 1                                      # now the kernel may end
    dev.synchronize()
    print("drained:", int(out.numpy()[0]) >= 0)
    ''', tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "interrupted, kernel started: 1" in done.stdout and "drained: True" in done.stdout, \
        done.stdout


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
