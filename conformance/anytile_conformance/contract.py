"""Whether a backend's sources use only anytile's public contract, for its tests::

    from anytile_conformance.contract import contract_violations, entry_module_file

    def test_sources_import_only_the_public_contract():
        assert entry_module_file("my-backend", PACKAGE) in PACKAGE.rglob("*.py")
        bad = contract_violations(PACKAGE, third_party={"numpy"})
        assert not bad, "\\n".join(bad)

The contract is five modules and what is under them (``PUBLIC_MODULES``); from those that
list their public names (``__all__``: ``anytile.backend``, ``anytile.ir``, ``anytile.errors``,
``anytile.gpu_host``), only those names and their public submodules may be imported.
"""
from __future__ import annotations

import ast
import importlib
import importlib.metadata
import sys
from pathlib import Path
from typing import Iterable, Iterator

__all__ = ["PUBLIC_MODULES", "contract_violations", "entry_module_file", "imported_modules",
           "imported_names", "is_public_name"]

#: the modules (and their submodules) a backend may import from anytile
PUBLIC_MODULES = ("anytile.backend", "anytile.ir", "anytile.errors", "anytile.codegen",
                  "anytile.gpu_host")
#: the public submodules of modules that list their public names (``anytile.ir``'s docstring
#: names them)
_PUBLIC_SUBMODULES = {"anytile.ir": frozenset({"types", "kinds", "ops", "rules", "dialects",
                                               "opsets", "uses"})}
#: the modules whose ``__all__`` bounds what may be imported from them
_LISTED = ("anytile.backend", "anytile.ir", "anytile.errors", "anytile.gpu_host")


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for each absolute import in the source file ``path``;
    ``from anytile import x`` counts as importing ``anytile`` and ``anytile.x``."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:                      # relative: inside the package
                continue
            yield node.lineno, node.module
            if node.module == "anytile":        # `from anytile import ir` names a module
                for alias in node.names:
                    yield node.lineno, f"anytile.{alias.name}"


def imported_names(path: Path) -> Iterator[tuple[int, str, str]]:
    """``(line, module, name)`` for each ``from module import name`` in ``path`` whose
    public names are bounded by its ``__all__`` (``anytile.backend``, ``anytile.ir``,
    ``anytile.errors``, ``anytile.gpu_host``)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module in _LISTED:
            for alias in node.names:
                yield node.lineno, node.module, alias.name


def is_public_name(module: str, name: str) -> bool:
    """Whether ``from module import name`` stays inside the contract: ``name`` is in
    ``module.__all__`` or is one of its public submodules."""
    return name in importlib.import_module(module).__all__ or \
        name in _PUBLIC_SUBMODULES.get(module, ())


def _allowed(module: str, package: str, third_party: frozenset) -> bool:
    top = module.split(".")[0]
    if top == "anytile":
        return any(module == p or module.startswith(p + ".") for p in PUBLIC_MODULES)
    return top == package or top in third_party or top in sys.stdlib_module_names


def contract_violations(package: Path, third_party: Iterable[str] = ()) -> list[str]:
    """``"file:line: ..."`` for each import in the sources under ``package`` (a backend's
    package folder) of anytile outside ``PUBLIC_MODULES``, of a name those modules do not
    list as public (their ``__all__``), or of another package that is neither ``package``
    itself, the standard library nor one of ``third_party``; empty when the sources keep to
    the contract."""
    allowed_third = frozenset(third_party)
    bad = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package.parent)
        bad += [f"{where}:{line}: import {module}" for line, module in imported_modules(path)
                if not _allowed(module, package.name, allowed_third)]
        bad += [f"{where}:{line}: from {module} import {name} (not in {module}.__all__)"
                for line, module, name in imported_names(path)
                if not is_public_name(module, name)]
    return bad


def entry_module_file(distribution: str, package: Path) -> Path:
    """The source file, under ``package``, of the module the installed ``distribution``'s
    ``anytile.backends`` entry point names (the one core imports): a test checks that its
    walk covers it, so a wrong folder cannot pass by finding nothing to check."""
    found = [ep for ep in importlib.metadata.distribution(distribution).entry_points
             if ep.group == "anytile.backends"]
    if not found:
        raise LookupError(f"{distribution} declares no anytile.backends entry point")
    module = found[0].value.split(":")[0]
    top, _, rest = module.partition(".")
    if top != package.name:
        raise LookupError(f"the entry point of {distribution} names {module}, outside "
                          f"{package.name}")
    return package.joinpath(*rest.split(".")).with_suffix(".py") if rest else \
        package / "__init__.py"
