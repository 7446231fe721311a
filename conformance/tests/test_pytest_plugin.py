"""The pytest11 plugin: option, fixtures, the capability marker and the catalogue as tests
(run in a child pytest, as a user's project would)."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def _pytest(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_fixtures_and_capability_marker(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.anytile_requires("fp64", "no_such_capability")
        def test_skipped(anytile_device):
            pass

        def test_fixtures(anytile_device, anytile_backend, anytile_capabilities, anytile_rng):
            assert anytile_device.info.name == "interpreter:0"
            assert anytile_backend.name == "interpreter" and "fp64" in anytile_capabilities
            assert 0 <= anytile_rng.random() < 1
    """))
    result = _pytest(tmp_path, "--anytile-device", "interpreter", "test_user.py")
    assert "1 passed, 1 skipped" in result.stdout, result.stdout + result.stderr
    assert "backend does not declare capability 'no_such_capability'" in result.stdout


def test_catalogue_runs_as_pytest_items(tmp_path):
    result = _pytest(tmp_path, "--anytile-device", "interpreter", "--pyargs",
                     "anytile_conformance.pytest_cases", "-k", "program_ids")
    assert "5 passed" in result.stdout, result.stdout + result.stderr
