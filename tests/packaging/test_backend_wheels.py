"""Every backend distribution of the repository works the way a vendor's user gets it: its
wheel and core's wheel installed into a fresh virtual environment (not editable), then
``anytile backends`` lists it and, where it is usable here, a kernel runs on it.

Slow (a virtual environment per distribution; pip's cache keeps the dependencies local after
the first run), and it needs pip to reach the package index the first time."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = sorted(p.parent for pattern in ("backends/*/pyproject.toml", "plugins/*/pyproject.toml")
                       for p in ROOT.glob(pattern))

#: a user's script: it checks its own result ("'ok': True")
EXAMPLE = ROOT / "examples" / "vector_add.py"


def _run(args: list, cwd: Path, timeout: float = 600) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode:
        raise AssertionError(f"{' '.join(map(str, args))} failed:\n{done.stdout[-3000:]}\n"
                             f"{done.stderr[-3000:]}")
    return done.stdout


def _wheel(project: Path, into: Path) -> Path:
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "--wheel-dir", into, project], cwd=into)
    name = tomllib.loads((project / "pyproject.toml").read_text())["project"]["name"]
    (wheel,) = into.glob(name.replace("-", "_") + "-*.whl")
    return wheel


@pytest.fixture(scope="module")
def core_wheel(tmp_path_factory) -> Path:
    return _wheel(ROOT, tmp_path_factory.mktemp("core-wheel"))


def test_every_backend_distribution_is_checked():
    names = {p.name for p in DISTRIBUTIONS}
    assert {"cpu", "nvidia", "opencl"} <= names


@pytest.mark.parametrize("project", DISTRIBUTIONS, ids=lambda p: p.name)
def test_wheel_installs_and_runs(project: Path, core_wheel: Path, tmp_path: Path):
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    entry_points = meta["entry-points"]["anytile.backends"]
    wheel = _wheel(project, tmp_path)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    python = venv / "bin" / "python"
    _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", core_wheel,
          wheel], cwd=tmp_path)
    listing = json.loads(_run([venv / "bin" / "anytile", "backends", "--json"], cwd=tmp_path))
    found = {b["name"]: b for b in listing}
    for name in entry_points:
        assert name in found, f"{name} is not listed: {sorted(found)}"
        record = found[name]
        assert record["version"] == meta["version"] and record["api_version"] == 1
        assert record["usable"] or record["reason"], record
    editable = _run([python, "-m", "pip", "list", "--editable"], cwd=tmp_path)
    assert "anytile" not in editable
    usable = [found[n] for n in entry_points if found[n]["usable"]]
    for record in usable:
        device = record["devices"][0].split(" ")[0]
        assert "'ok': True" in _run([python, EXAMPLE, device], cwd=tmp_path)
