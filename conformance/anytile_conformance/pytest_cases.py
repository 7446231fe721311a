"""The conformance catalogue as pytest tests:
``pytest --anytile-device DEV --pyargs anytile_conformance.pytest_cases``."""
from __future__ import annotations

from typing import Any

import pytest

from .runner import FAILED, SKIPPED, run_case


def test_conformance_case(anytile_conformance_case: Any, anytile_device: Any,
                          anytile_capabilities: frozenset, pytestconfig: Any) -> None:
    result = run_case(anytile_conformance_case, anytile_device,
                      pytestconfig.getoption("--anytile-seed"), anytile_capabilities)
    if result.status == SKIPPED:
        pytest.skip(result.message)
    if result.status == FAILED:
        pytest.fail(result.message, pytrace=False)
