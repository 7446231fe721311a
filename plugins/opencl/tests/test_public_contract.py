"""The plugin is what an outside vendor could write: its sources import only anytile's public
contract (``anytile.backend``, ``anytile.ir``, ``anytile.errors``, documented
``anytile.codegen`` helpers), its own package, the standard library, NumPy and pyopencl."""
import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "anytile_opencl"
PUBLIC = ("anytile.backend", "anytile.ir", "anytile.errors", "anytile.codegen")
THIRD_PARTY = {"numpy", "pyopencl"}


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
    return top == "anytile_opencl" or top in THIRD_PARTY or top in sys.stdlib_module_names


def test_sources_import_only_the_public_contract():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) >= 10
    bad = [f"{p.relative_to(PACKAGE.parent)}:{line}: import {m}"
           for p in sources for line, m in _imports(p) if not _allowed(m)]
    assert not bad, "the plugin reaches past the public contract:\n" + "\n".join(bad)


def test_the_check_catches_private_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from anytile.runtime import launch\nimport anytile.language\n"
                     "from anytile import interpreter\nfrom anytile.ir import Block\n")
    found = [m for _, m in _imports(probe) if not _allowed(m)]
    assert found == ["anytile.runtime", "anytile.language", "anytile", "anytile.interpreter"]
