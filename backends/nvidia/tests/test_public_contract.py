"""The backend is built as any vendor's would be: its sources import only anytile's public
contract (``anytile.backend``, ``anytile.ir``, ``anytile.errors``, ``anytile.codegen``,
``anytile.gpu_host``), its own package, the standard library and what it or core depends on
(the conformance suite's walk, ``anytile_conformance.contract``)."""
from pathlib import Path

from anytile_conformance.contract import contract_violations, entry_module_file

PACKAGE = Path(__file__).resolve().parents[1] / "anytile_nvidia"
THIRD_PARTY = {"cuda", "llvmlite", "ml_dtypes", "numpy"}


def test_sources_import_only_the_public_contract():
    # the walk covers the module core loads (a wrong PACKAGE would find nothing to check)
    assert entry_module_file("anytile-nvidia", PACKAGE) in sorted(PACKAGE.rglob("*.py"))
    bad = contract_violations(PACKAGE, THIRD_PARTY)
    assert not bad, "the backend reaches past the public contract:\n" + "\n".join(bad)
