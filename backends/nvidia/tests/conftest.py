"""Keep the on-disk compile cache of these tests out of the user's cache folder."""
import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    if "ANYTILE_CACHE_DIR" not in os.environ:
        os.environ["ANYTILE_CACHE_DIR"] = str(tmp_path_factory.mktemp("anytile-cache"))
    yield
