"""The plugin is what an outside vendor could write: its sources import only anytile's public
contract (``anytile.backend``, ``anytile.ir``, ``anytile.errors``, documented
``anytile.codegen`` helpers), its own package, the standard library, NumPy and pyopencl; and
from ``anytile.ir`` only the names of its public surface (``anytile.ir.__all__``) and its
public modules.  The walk is the conformance suite's (``anytile_conformance.contract``)."""
from pathlib import Path

from anytile_conformance.contract import contract_violations, entry_module_file

PACKAGE = Path(__file__).resolve().parents[1] / "anytile_opencl"
#: the distribution whose ``anytile.backends`` entry point names the plugin's class
DISTRIBUTION = "anytile-opencl"
THIRD_PARTY = {"numpy", "pyopencl"}


def test_sources_import_only_the_public_contract():
    # the walk covers the module core loads (a wrong PACKAGE would find nothing to check)
    assert entry_module_file(DISTRIBUTION, PACKAGE) in sorted(PACKAGE.rglob("*.py"))
    bad = contract_violations(PACKAGE, THIRD_PARTY)
    assert not bad, "the plugin reaches past the public contract:\n" + "\n".join(bad)
