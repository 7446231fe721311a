"""Keep the on-disk compile cache of these tests out of the user's cache folder; make the
helpers next to them (``tma_kit``) importable (pytest runs with --import-mode=importlib)."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
pytest.register_assert_rewrite("tma_kit")

# verify the IR after every pass and every IR-producing compile stage (ir.verifier)
os.environ.setdefault("ANYTILE_VERIFY", "1")


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    if "ANYTILE_CACHE_DIR" not in os.environ:
        os.environ["ANYTILE_CACHE_DIR"] = str(tmp_path_factory.mktemp("anytile-cache"))
    yield
