"""NumPy arguments on a host device (cpu) take the launch fast path once a launch like them
was made, and only where the general path would do the same: the key follows the dtype,
contiguity, writeability and alignment, and an entry made on the default device holds only
while that device is the default."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.interpreter import InterpreterBackend
from anytile.runtime import fast_launch


@pytest.fixture
def cpu(monkeypatch):
    if "cpu" not in [d.type for d in at.devices()]:
        pytest.skip("the cpu backend is not usable here")
    monkeypatch.delenv("ANYTILE_DEVICE", raising=False)
    monkeypatch.delenv("ANYTILE_GPU_SIMULATOR", raising=False)   # the default device is cpu
    from anytile.runtime import discovery
    discovery.discover(refresh=True)
    assert str(at.device()) == "cpu:0"
    yield at.device("cpu")
    monkeypatch.undo()
    discovery.discover(refresh=True)


@pytest.fixture
def general_launches(monkeypatch):
    """How many launches went through the general path."""
    count = [0]
    launch_bound = fast_launch.launch_bound

    def counted(*args, **kwargs):
        count[0] += 1
        return launch_bound(*args, **kwargs)
    monkeypatch.setattr(fast_launch, "launch_bound", counted)
    return count


def _kernel():
    # a kernel object per test: each starts with no plans and no fast entries
    @at.jit
    def add_one(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)
    return add_one


def _launch(kernel, out, x):
    kernel[(1,)](out, x, x.size, BLOCK=64)


def test_repeated_numpy_launches_take_the_fast_path(cpu, general_launches, rng, poison):
    kernel = _kernel()
    for launch in range(4):
        x = rng.standard_normal(64).astype(np.float32)     # new arrays every time
        out = poison(64, np.float32)
        _launch(kernel, out, x)
        np.testing.assert_array_equal(out, x + 1)
    assert general_launches[0] == 1


def test_a_new_dtype_or_alignment_takes_the_general_path_once(cpu, general_launches, rng,
                                                               poison):
    kernel = _kernel()
    for dtype in (np.float32, np.int32, np.float32, np.int32):
        x = (rng.standard_normal(64) * 100).astype(dtype)
        out = poison(64, dtype)
        _launch(kernel, out, x)
        np.testing.assert_array_equal(out, x + 1)
    assert general_launches[0] == 2
    x = rng.standard_normal(65).astype(np.float32)
    out = poison(65, np.float32)
    for _ in range(2):                       # 4 bytes past a 16-byte boundary
        _launch(kernel, out[1:], x[1:])
        np.testing.assert_array_equal(out[1:], x[1:] + 1)
    assert general_launches[0] == 3


def test_a_read_only_output_is_refused_after_a_writeable_one(cpu, rng, poison):
    kernel = _kernel()
    x = rng.standard_normal(64).astype(np.float32)
    _launch(kernel, poison(64, np.float32), x)
    _launch(kernel, poison(64, np.float32), x)
    out = poison(64, np.float32)
    out.flags.writeable = False
    with pytest.raises(at.LaunchError, match="read-only"):
        _launch(kernel, out, x)
    assert np.isnan(out).all()


def test_a_non_contiguous_array_is_refused_after_contiguous_ones(cpu, rng, poison):
    kernel = _kernel()
    x = rng.standard_normal(128).astype(np.float32)
    _launch(kernel, poison(64, np.float32), x[:64])
    _launch(kernel, poison(64, np.float32), x[:64])
    with pytest.raises(at.LaunchArgumentError, match="non-contiguous NumPy array"):
        _launch(kernel, poison(64, np.float32), x[::2])


def test_a_new_default_device_takes_the_launch(cpu, monkeypatch, rng, poison):
    kernel = _kernel()
    x = rng.standard_normal(64).astype(np.float32)
    for _ in range(2):
        _launch(kernel, poison(64, np.float32), x)
    ran = []
    launch = InterpreterBackend.launch

    def counted(self, *args, **kwargs):
        ran.append(1)
        return launch(self, *args, **kwargs)
    monkeypatch.setattr(InterpreterBackend, "launch", counted)
    monkeypatch.setenv("ANYTILE_DEVICE", "interpreter")
    out = poison(64, np.float32)
    _launch(kernel, out, x)
    np.testing.assert_array_equal(out, x + 1)
    assert ran == [1]
    monkeypatch.delenv("ANYTILE_DEVICE")
    _launch(kernel, poison(64, np.float32), x)
    assert ran == [1]


SCALED = '''
import anytile as at, anytile.language as tl

SCALE = tl.constexpr(2.0)


@at.jit
def scaled(out_ptr, x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * SCALE)
'''


def test_an_entry_made_on_the_default_device_sees_a_rebound_global(cpu, tmp_path, monkeypatch,
                                                                  rng, poison):
    path = tmp_path / "scaled_module.py"
    path.write_text(SCALED)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    module = importlib.import_module("scaled_module")
    try:
        x = rng.standard_normal(16).astype(np.float32)
        for scale in (2.0, 3.0):
            module.SCALE = module.tl.constexpr(scale)
            for _ in range(2):
                out = poison(16, np.float32)
                module.scaled[(1,)](out, x, BLOCK=16)
                np.testing.assert_array_equal(out, x * np.float32(scale))
    finally:
        import sys
        sys.modules.pop("scaled_module", None)
