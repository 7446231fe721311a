"""pytest plugin (entry point ``pytest11``): ``pytest --anytile-device DEV`` in any project.

Adds:
* options ``--anytile-device DEV`` (default: ``ANYTILE_DEVICE`` or anytile's default
  device), ``--anytile-mode quick|full`` and ``--anytile-seed S``;
* fixtures ``anytile_device`` (an ``at.Device``), ``anytile_backend``,
  ``anytile_capabilities`` and ``anytile_rng`` (a NumPy generator seeded from the seed and the
  test's id);
* marker ``@pytest.mark.anytile_requires("fp64", ...)``: skip the test unless the device's
  backend declares those capabilities (the reason names the missing ones);
* the conformance catalogue as tests: ``pytest --anytile-device cpu --pyargs
  anytile_conformance.pytest_cases`` (``-k`` selects cases as usual).

Nothing here imports anytile until a fixture is used, so installing the plugin never slows
down or breaks an unrelated test run.
"""
from __future__ import annotations

import hashlib
from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("anytile", "anytile conformance")
    group.addoption("--anytile-device", default=None,
                    help="anytile device the anytile fixtures and conformance cases run on")
    group.addoption("--anytile-mode", default="quick", choices=("quick", "full"),
                    help="conformance catalogue size (default quick)")
    group.addoption("--anytile-seed", type=int, default=20261122,
                    help="seed of the anytile_rng fixture and of conformance inputs")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "anytile_requires(*capabilities): skip unless the anytile "
                            "device's backend declares every named capability")


@pytest.fixture(scope="session")
def anytile_device(pytestconfig: Any) -> Any:
    """The device named by ``--anytile-device`` (or anytile's default device)."""
    import anytile as at
    from anytile.errors import BackendError
    name = pytestconfig.getoption("--anytile-device")
    try:
        return at.device(name)
    except BackendError as exc:
        pytest.exit(f"--anytile-device {name}: {exc}", returncode=4)


@pytest.fixture(scope="session")
def anytile_backend(anytile_device: Any) -> Any:
    return anytile_device.backend


@pytest.fixture(scope="session")
def anytile_capabilities(anytile_device: Any) -> frozenset:
    from .runner import device_capabilities
    return device_capabilities(anytile_device)


@pytest.fixture
def anytile_rng(request: Any) -> Any:
    """A NumPy generator seeded from ``--anytile-seed`` and the test id (reproducible)."""
    import numpy as np
    seed = request.config.getoption("--anytile-seed")
    digest = hashlib.sha256(f"{seed}:{request.node.nodeid}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


@pytest.fixture(autouse=True)
def _anytile_requires(request: Any) -> None:
    marker = request.node.get_closest_marker("anytile_requires")
    if marker is None:
        return
    capabilities = request.getfixturevalue("anytile_capabilities")
    missing = [c for c in marker.args if c not in capabilities]
    if missing:
        pytest.skip("backend does not declare capability " + ", ".join(repr(m) for m in missing))


def pytest_generate_tests(metafunc: Any) -> None:
    if "anytile_conformance_case" not in metafunc.fixturenames:
        return
    from .case import expand_all
    cases = expand_all(metafunc.config.getoption("--anytile-mode"))
    metafunc.parametrize("anytile_conformance_case", cases, ids=[c.id for c in cases])
