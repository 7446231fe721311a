"""The pytest11 plugin: option, fixtures, the capability marker and the catalogue as tests."""
from __future__ import annotations


def test_fixtures_and_capability_marker(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.anytile_requires("fp64", "no_such_capability")
        def test_skipped(anytile_device):
            pass

        def test_fixtures(anytile_device, anytile_backend, anytile_capabilities, anytile_rng):
            assert anytile_device.info.name == "interpreter:0"
            assert anytile_backend.name == "interpreter" and "fp64" in anytile_capabilities
            assert 0 <= anytile_rng.random() < 1
    """)
    result = pytester.runpytest("--anytile-device", "interpreter", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*backend does not declare capability 'no_such_capability'*"])


def test_catalogue_runs_as_pytest_items(pytester):
    result = pytester.runpytest("--anytile-device", "interpreter", "--pyargs",
                                "anytile_conformance.pytest_cases", "-k", "program_ids")
    result.assert_outcomes(passed=5)
