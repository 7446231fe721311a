"""Fixtures of the cpu backend's tests (``cpu_kit`` sits beside this file)."""
import os
import sys
import zlib

import numpy as np
import pytest

# verify the IR after every pass and every IR-producing compile stage (ir.verifier)
os.environ.setdefault("ANYTILE_VERIFY", "1")

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def rng(request):
    # a recorded seed per test, so a failure is reproducible
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
