"""The plugin is what an outside vendor could write: its sources import only anytile's public
contract (``anytile.backend``, ``anytile.ir``, ``anytile.errors``, documented
``anytile.codegen`` helpers), its own package, the standard library, NumPy and pyopencl; and
from ``anytile.ir`` only the names of its public surface (``anytile.ir.__all__``) and its
public modules."""
import ast
import importlib.metadata
import sys
from pathlib import Path

import anytile.ir

PACKAGE = Path(__file__).resolve().parents[1] / "anytile_opencl"
#: the distribution whose ``anytile.backends`` entry point names the plugin's class
DISTRIBUTION = "anytile-opencl"
PUBLIC = ("anytile.backend", "anytile.ir", "anytile.errors", "anytile.codegen")
THIRD_PARTY = {"numpy", "pyopencl"}
#: the modules of ``anytile.ir`` that are public (its docstring names them)
IR_MODULES = {"types", "kinds", "ops", "rules", "dialects", "opsets", "uses"}


def _imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:                      # relative: inside the plugin
                continue
            yield node.lineno, node.module
            if node.module == "anytile":        # `from anytile import runtime` names modules
                for alias in node.names:
                    yield node.lineno, f"anytile.{alias.name}"


def _allowed(module: str) -> bool:
    top = module.split(".")[0]
    if top == "anytile":
        return any(module == p or module.startswith(p + ".") for p in PUBLIC)
    return top == PACKAGE.name or top in THIRD_PARTY or top in sys.stdlib_module_names


def _entry_module_file() -> Path:
    """The source file of the module the plugin's entry point names: the one core imports."""
    found = [ep for ep in importlib.metadata.distribution(DISTRIBUTION).entry_points
             if ep.group == "anytile.backends"]
    assert found, f"{DISTRIBUTION} declares no anytile.backends entry point"
    module = found[0].value.split(":")[0]
    top, _, rest = module.partition(".")
    assert top == PACKAGE.name, f"the entry point names {module}, outside {PACKAGE.name}"
    return PACKAGE.joinpath(*rest.split(".")).with_suffix(".py") if rest else \
        PACKAGE / "__init__.py"


def _ir_names(path: Path):
    """``(line, name)`` for each name imported ``from anytile.ir import name``."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module == "anytile.ir":
            for alias in node.names:
                yield node.lineno, alias.name


def _public_ir_name(name: str) -> bool:
    return name in anytile.ir.__all__ or name in IR_MODULES


def test_sources_import_only_the_public_contract():
    sources = sorted(PACKAGE.rglob("*.py"))
    # the walk covers the module core loads (a wrong PACKAGE would find nothing to check)
    assert _entry_module_file() in sources
    bad = [f"{p.relative_to(PACKAGE.parent)}:{line}: import {m}"
           for p in sources for line, m in _imports(p) if not _allowed(m)]
    assert not bad, "the plugin reaches past the public contract:\n" + "\n".join(bad)
    private = [f"{p.relative_to(PACKAGE.parent)}:{line}: from anytile.ir import {name}"
               for p in sources for line, name in _ir_names(p) if not _public_ir_name(name)]
    assert not private, "names outside anytile.ir.__all__:\n" + "\n".join(private)


def test_the_check_catches_private_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from anytile.runtime import launch\nimport anytile.language\n"
                     "from anytile import interpreter\nfrom anytile.ir import Block\n")
    found = [m for _, m in _imports(probe) if not _allowed(m)]
    assert found == ["anytile.runtime", "anytile.language", "anytile", "anytile.interpreter"]
    assert [n for _, n in _ir_names(probe)] == ["Block"] and _public_ir_name("Block")
    assert not _public_ir_name("OP_REGISTRY") and _public_ir_name("ops")
