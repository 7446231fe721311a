import os
import shutil
import sys
from pathlib import Path

import pytest

PLUGINS = Path(__file__).parent / "plugins"

ENTRY_POINTS = """\
[anytile.backends]
numpy-source = numpy_source_backend:NumpySourceBackend
broken = broken_import:Anything
from-the-future = wrong_api:FutureBackend
not-a-backend = wrong_api:NotABackend
exits = exits_on_import:Anything
hanging = misbehaving:HangingDevices
raising-host = misbehaving:RaisingHostDevices
"""


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    """A site folder holding the test plugins as an installed distribution (dist-info with
    entry points), put on sys.path and PYTHONPATH; discovery is refreshed around the test."""
    site = tmp_path / "site"
    site.mkdir()
    for f in PLUGINS.glob("*.py"):
        shutil.copy(f, site / f.name)
    info = site / "anytile_test_plugins-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: anytile-test-plugins\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    (info / "top_level.txt").write_text("numpy_source_backend\nbroken_import\nwrong_api\n"
                                        "exits_on_import\nmisbehaving\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    # the hanging plugin costs 5 s, not 10; the others, imported on a loaded machine, need
    # far less than that
    monkeypatch.setenv("ANYTILE_PLUGIN_TIMEOUT", "5")
    from anytile.runtime import discovery
    discovery.discover(refresh=True)
    yield site
    monkeypatch.undo()
    for mod in ("numpy_source_backend", "broken_import", "wrong_api", "exits_on_import",
                "misbehaving"):
        sys.modules.pop(mod, None)
    discovery.discover(refresh=True)
