"""Fixtures of the OpenCL plugin's tests (``ocl_kit`` sits beside this file)."""
import os
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def rng(request):
    # a recorded seed per test, so a failure is reproducible
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    """The on-disk compile cache of a test run lives in a temporary folder."""
    if "ANYTILE_CACHE_DIR" not in os.environ:
        os.environ["ANYTILE_CACHE_DIR"] = str(tmp_path_factory.mktemp("anytile-cache"))
    yield
