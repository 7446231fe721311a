"""Verify the IR everywhere, and keep these tests' on-disk compile cache out of the user's."""
import os
import zlib

import numpy as np
import pytest

# verify the IR after every pass and every IR-producing compile stage (ir.verifier)
os.environ.setdefault("ANYTILE_VERIFY", "1")


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    if "ANYTILE_CACHE_DIR" not in os.environ:
        os.environ["ANYTILE_CACHE_DIR"] = str(tmp_path_factory.mktemp("anytile-cache"))
    yield


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
