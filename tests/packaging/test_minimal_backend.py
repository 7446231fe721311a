"""The minimal example backend (``docs/examples/minimal_backend``) as a vendor ships it: its
wheel, built with core's and the conformance suite's wheels, is installed into a fresh virtual
environment with no package index (``pip install --no-index --find-links``), ``anytile
backends`` lists it, and the quick conformance suite certifies it CONFORMANT.  Its sources
import only anytile's public contract.

The fresh environment gets anytile, the suite and the backend from their wheels; the
third-party packages they depend on (NumPy, ml_dtypes, stevedore, llvmlite) are the ones of
the running environment, put on its path by a ``.pth`` file, so nothing is downloaded."""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from anytile_conformance.contract import contract_violations

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "minimal_backend"
PACKAGE = EXAMPLE / "anytile_minimal"
#: each distribution: its project folder and what of it a build reads
PROJECTS = {"anytile": (ROOT, ["pyproject.toml", "README.md", "core/anytile"]),
            "anytile-conformance": (ROOT / "conformance",
                                    ["pyproject.toml", "README.md", "anytile_conformance"]),
            "anytile-minimal": (EXAMPLE, ["pyproject.toml", "README.md", "anytile_minimal"])}


# -- the contract test of a plugin (plugins/opencl/tests/test_public_contract.py's, without
# -- the entry point check: the backend is installed only into the fresh environment)
def test_sources_import_only_the_public_contract():
    assert PACKAGE / "backend.py" in sorted(PACKAGE.rglob("*.py"))
    bad = contract_violations(PACKAGE, third_party={"numpy"})
    assert not bad, "the plugin reaches past the public contract:\n" + "\n".join(bad)


# -- the wheel, a fresh environment, the certificate ------------------------------------------
def _run(args: list, cwd: Path, env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode:
        raise AssertionError(f"{' '.join(map(str, args))} failed ({done.returncode}):\n"
                             f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def _requirement_names(requirements: list[str]) -> list[str]:
    return [re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0] for r in requirements
            if "extra ==" not in r]


def _dependencies(wheels: list[Path]) -> list[importlib.metadata.Distribution]:
    """The installed third-party distributions the ``wheels`` need, transitively."""
    todo = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = archive.read(name).decode()
        todo += _requirement_names(re.findall(r"^Requires-Dist: (.+)$", metadata, re.M))
    found: dict[str, importlib.metadata.Distribution] = {}
    while todo:
        name = todo.pop()
        if name.lower().startswith("anytile"):
            continue
        dist = importlib.metadata.distribution(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key not in found:
            found[key] = dist
            todo += _requirement_names(dist.requires or [])
    return list(found.values())


def _sources(name: str, into: Path) -> Path:
    """A clean copy of distribution ``name``'s sources (no build folders left in the tree, no
    stale files from an earlier build in the wheel)."""
    folder, parts = PROJECTS[name]
    for part in parts:
        if (folder / part).is_dir():
            shutil.copytree(folder / part, into / part,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            (into / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(folder / part, into / part)
    return into


def _share(dists: list[importlib.metadata.Distribution], into: Path) -> None:
    """Link each distribution's top-level files (package, metadata, libraries) into ``into``."""
    into.mkdir()
    for dist in dists:
        base = Path(dist.locate_file(""))
        for top in {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if not (into / top).exists():
                (into / top).symlink_to(base / top)


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory) -> tuple[Path, dict]:
    """A new virtual environment with anytile, the suite and the minimal backend installed
    from their wheels, and the environment variables to run it with."""
    work = tmp_path_factory.mktemp("minimal-backend")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_CONFIG_FILE"] = os.devnull          # no index, no find-links but our own
    wheels = work / "wheels"
    sources = [_sources(name, work / "src" / name) for name in PROJECTS]
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "--wheel-dir", wheels, *sources], cwd=work, env=env)
    built = sorted(p.name.split("-")[0] for p in wheels.glob("*.whl"))
    assert built == ["anytile", "anytile_conformance", "anytile_minimal"], built
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=work, env=env)
    python = venv / "bin" / "python"
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   cwd=work, env=env).stdout.strip()
    _share(_dependencies(sorted(wheels.glob("*.whl"))), work / "shared")
    (Path(purelib) / "shared_dependencies.pth").write_text(f"{work / 'shared'}\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-index",
          "--find-links", wheels, *PROJECTS], cwd=work, env=env)
    return venv, env


def test_the_wheels_install_without_an_index(fresh_env):
    venv, env = fresh_env
    where = _run([venv / "bin" / "python", "-c",
                  "import anytile, anytile_conformance, anytile_minimal as m\n"
                  "print(anytile.__file__); print(anytile_conformance.__file__); print(m.__file__)"],
                 cwd=venv, env=env).stdout.split()
    assert all(path.startswith(str(venv)) for path in where), where   # not this checkout
    listing = json.loads(_run([venv / "bin" / "anytile", "backends", "--json"],
                              cwd=venv, env=env).stdout)
    found = {b["name"]: b for b in listing}
    assert found["minimal"]["usable"] and found["minimal"]["api_version"] == 1, found
    assert found["minimal"]["devices"][0].startswith("minimal:0")


#: run in the fresh environment: the evaluator runs every op the backend declares, and core
#: refuses one it does not declare (``print``) before the backend's ``load`` sees it
_DECLARED_OPS_CHECK = """
import numpy as np
import anytile as at, anytile.language as tl
from anytile_minimal.backend import MinimalBackend
from anytile_minimal.evaluate import SUPPORTED

assert {op.NAME for op in SUPPORTED} == set(MinimalBackend().lowered_ops())

@at.jit
def shows(x_ptr):
    tl.device_print("x", tl.load(x_ptr))

try:
    shows[(1,)](at.asarray(np.ones(1, np.float32), device="minimal:0"))
except at.CompilationError as err:
    print(err.message)
"""


def test_core_refuses_the_ops_it_does_not_declare(fresh_env, tmp_path):
    venv, env = fresh_env
    script = tmp_path / "declared_ops.py"
    script.write_text(_DECLARED_OPS_CHECK)
    said = _run([venv / "bin" / "python", script], cwd=tmp_path, env=env).stdout
    assert said.startswith("tl.device_print is not supported on backend 'minimal'"), said


def test_the_quick_conformance_suite_certifies_it(fresh_env, tmp_path):
    venv, env = fresh_env
    report = tmp_path / "report.json"
    done = _run([venv / "bin" / "anytile", "conformance", "--device", "minimal:0", "--quick",
                 "--json", report], cwd=tmp_path, env=env)
    assert done.stdout.rstrip().splitlines()[-1] == "CONFORMANT", done.stdout[-3000:]
    data = json.loads(report.read_text())
    statuses = {r["status"] for r in data["results"]}
    assert statuses <= {"passed", "skipped"}, statuses
    assert sum(r["status"] == "passed" for r in data["results"]) >= 200
