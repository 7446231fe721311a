"""Shared fixtures: ``device`` runs a test on every usable device (interpreter, cpu, ...)."""
import os
import zlib

import numpy as np
import pytest

# verify the IR after every pass and every IR-producing compile stage (ir.verifier)
os.environ.setdefault("ANYTILE_VERIFY", "1")


def _usable_devices():
    import anytile as at
    return [d.name for d in at.devices()]


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", _usable_devices(), indirect=True)


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    """The on-disk compile cache of a test run lives in a temporary folder."""
    if "ANYTILE_CACHE_DIR" not in os.environ:
        os.environ["ANYTILE_CACHE_DIR"] = str(tmp_path_factory.mktemp("anytile-cache"))
    yield


@pytest.fixture
def device(request):
    import anytile as at
    return at.device(request.param)


@pytest.fixture
def rng(request):
    # a recorded seed per test, so a failure is reproducible
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def poison():
    """``poison(shape, dtype)``: an output array no correct kernel leaves unchanged."""
    return poisoned


def poisoned(shape, dtype):
    """An output buffer full of a value no correct kernel writes (NaN for floats)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.full(shape, np.nan, dtype)
    return np.full(shape, np.iinfo(dtype).min + 7 if dtype.kind == "i" else np.iinfo(dtype).max - 7, dtype)
