"""The public-contract walk plugins' tests use (``anytile_conformance.contract``) catches
what reaches past the contract and lets the contract through."""
from pathlib import Path

import pytest

from anytile_conformance.contract import (contract_violations, entry_module_file,
                                          imported_modules, is_public_name)


def _package(tmp_path: Path, source: str) -> Path:
    package = tmp_path / "my_backend"
    (package / "codegen").mkdir(parents=True)
    (package / "__init__.py").write_text("from .backend import MyBackend\n")
    (package / "codegen" / "emit.py").write_text(source)
    return package


def test_the_check_catches_private_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from anytile.runtime import launch\nimport anytile.language\n"
                     "from anytile import ir, interpreter\nimport anytile_opencl\n")
    package = _package(tmp_path, probe.read_text() + "from anytile.ir import OP_REGISTRY\n"
                       "from anytile.errors import DIVISION_PREFIX\n")
    assert [m for _, m in imported_modules(probe)] == \
        ["anytile.runtime", "anytile.language", "anytile", "anytile.ir", "anytile.interpreter",
         "anytile_opencl"]
    assert contract_violations(package) == [
        "my_backend/codegen/emit.py:1: import anytile.runtime",
        "my_backend/codegen/emit.py:2: import anytile.language",
        "my_backend/codegen/emit.py:3: import anytile",
        "my_backend/codegen/emit.py:3: import anytile.interpreter",
        "my_backend/codegen/emit.py:4: import anytile_opencl",
        "my_backend/codegen/emit.py:5: from anytile.ir import OP_REGISTRY "
        "(not in anytile.ir.__all__)",
        "my_backend/codegen/emit.py:6: from anytile.errors import DIVISION_PREFIX "
        "(not in anytile.errors.__all__)"]


def test_the_contract_passes(tmp_path):
    package = _package(tmp_path, "import os\nimport numpy as np\nimport anytile.ir as ir\n"
                                 "from anytile.ir import Block, Uses, ops\n"
                                 "from anytile.ir.types import f32\n"
                                 "from anytile.backend import Backend, numpy_view_of\n"
                                 "from anytile.gpu_host import DriverBackend\n"
                                 "from anytile.errors import BOUNDS_PREFIX, LaunchError\n"
                                 "from anytile.codegen.llvm.types import I32\n"
                                 "from . import backend\nfrom ..my_backend import memory\n")
    assert contract_violations(package, third_party={"numpy"}) == []
    assert contract_violations(package) == ["my_backend/codegen/emit.py:2: import numpy"]
    assert is_public_name("anytile.ir", "Block") and is_public_name("anytile.ir", "ops")
    assert not is_public_name("anytile.ir", "OP_REGISTRY")


def test_entry_module_file_names_the_module_core_imports():
    import anytile_conformance
    package = Path(anytile_conformance.__file__).parent
    with pytest.raises(LookupError, match="no anytile.backends entry point"):
        entry_module_file("anytile-conformance", package)
