"""Discovery of plugins through the anytile.backends entry points, with broken ones."""
import subprocess
import sys

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.runtime.discovery import discover


def test_interpreter_is_always_discovered_and_usable():
    record = discover()["interpreter"]
    assert record.loaded and record.availability.usable
    assert at.device("interpreter").name == "interpreter:0"


def test_broken_plugins_are_reported_and_do_not_break_others(plugin_path):
    records = discover()
    assert records["numpy-source"].loaded
    assert records["numpy-source"].version == "1.2.3"
    assert "failed to import" in records["broken"].error
    assert "broken on purpose" in records["broken"].error
    assert "API version 99" in records["from-the-future"].error
    assert "not a subclass" in records["not-a-backend"].error
    assert records["interpreter"].loaded


def test_asking_for_a_broken_backend_says_why(plugin_path):
    with pytest.raises(at.BackendError, match="API version 99"):
        at.get_backend("from-the-future")
    with pytest.raises(at.BackendError, match="broken on purpose"):
        at.device("broken")
    with pytest.raises(at.BackendError, match="no anytile backend named 'nope'"):
        at.get_backend("nope")


def test_cli_lists_every_plugin_with_reasons(plugin_path):
    out = subprocess.run([sys.executable, "-m", "anytile", "backends"], capture_output=True,
                         text=True, check=True).stdout
    for name in ("interpreter", "numpy-source", "broken", "from-the-future", "not-a-backend"):
        assert name in out
    assert "broken on purpose" in out and "API version 99" in out
    assert "npsrc:0" in out


@at.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def test_a_plugin_written_against_the_public_contract_runs_kernels(plugin_path):
    dev = at.device("npsrc:0")
    rng = np.random.default_rng(7)
    xh = rng.standard_normal(1000).astype(np.float32)
    yh = rng.standard_normal(1000).astype(np.float32)
    x, y = at.asarray(xh, device=dev), at.asarray(yh, device=dev)
    out = at.asarray(np.full(1000, np.nan, np.float32), device=dev)
    compiled = _add_kernel[(at.cdiv(1000, 128),)](x, y, out, 1000, BLOCK=128)
    assert "def kernel(" in compiled.asm["python-src"]
    assert list(compiled.asm) == ["ir", "python-src"]
    np.testing.assert_array_equal(out.numpy(), xh + yh)


class _FakeGpuArray:
    """A foreign array of a pretend non-host framework: a NumPy array with a DLPack-style
    device tag."""

    def __init__(self, data):
        self.data = data

    def __dlpack_device__(self):
        return (99, 0)

    def __dlpack__(self, stream=None):
        raise NotImplementedError


def test_a_launch_with_only_foreign_arrays_runs_where_a_backend_claims_them(plugin_path):
    from numpy_source_backend import NumpySourceBackend

    class FakeGpuBackend(NumpySourceBackend):
        name = "fakegpu"
        device_prefix = "fakegpu"
        host_memory = False

        def devices(self):
            return [at.backend.DeviceInfo("fakegpu:0", 0, "pretend GPU")]

        def device_of_foreign(self, obj):
            return self.devices()[0] if isinstance(obj, _FakeGpuArray) else None

        def import_array(self, obj, device):
            return super().import_array(obj.data, device) if isinstance(obj, _FakeGpuArray) else None

    at.register_backend(FakeGpuBackend)
    try:
        xh = np.arange(100, dtype=np.float32)
        out = np.full(100, np.nan, np.float32)
        compiled = _add_kernel[(1,)](_FakeGpuArray(xh), _FakeGpuArray(xh), _FakeGpuArray(out),
                                     100, BLOCK=128)
        assert compiled.target.backend == "fakegpu"
        np.testing.assert_array_equal(out, 2 * xh)
    finally:
        from anytile.runtime.discovery import unregister_backend
        unregister_backend("fakegpu")


def test_misbehaving_plugins_are_isolated(plugin_path):
    records = discover()
    assert "SystemExit" in records["exits"].error and "on purpose" in records["exits"].error
    hanging = records["hanging"].availability
    assert not hanging.usable and "did not return within 5 s" in hanging.reason
    raising = records["raising-host"].availability
    assert not raising.usable and "devices() is broken on purpose" in raising.reason
    names = [d.name for d in at.devices()]
    assert "interpreter:0" in names and "npsrc:0" in names


def test_numpy_arrays_still_reach_the_default_host_device(plugin_path, monkeypatch):
    monkeypatch.delenv("ANYTILE_DEVICE", raising=False)
    xh = np.arange(64, dtype=np.float32)
    out = np.full(64, np.nan, np.float32)
    _add_kernel[(1,)](xh, xh, out, 64, BLOCK=64)
    np.testing.assert_array_equal(out, 2 * xh)


def test_cli_survives_misbehaving_plugins(plugin_path):
    done = subprocess.run([sys.executable, "-m", "anytile", "backends"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for reason in ("on purpose", "did not return within 5 s", "devices() is broken on purpose"):
        assert reason in done.stdout
    assert "interpreter:0" in done.stdout


def test_a_probe_still_working_at_its_limit_is_waited_for(monkeypatch):
    """A plugin slow to load (a loaded machine, many processes importing at once) is not
    taken for a hung one while it uses the CPU; one that waits without working is."""
    import threading
    import time
    from anytile.runtime import discovery
    from anytile.runtime.discovery import ProbeFailed, probe
    monkeypatch.setenv("ANYTILE_PLUGIN_TIMEOUT", "0.4")
    monkeypatch.setattr(discovery, "BUSY_LIMITS", 10_000)   # however loaded the machine

    def work_for_cpu_seconds(seconds: float) -> str:
        start = time.thread_time()
        while time.thread_time() - start < seconds:
            sum(range(1000))
        return "loaded"

    assert probe("importing slow", lambda: work_for_cpu_seconds(1.2)) == "loaded"
    never = threading.Event()
    with pytest.raises(ProbeFailed, match="importing stuck did not return within 0.4 s"):
        probe("importing stuck", lambda: never.wait(60))
    never.set()
