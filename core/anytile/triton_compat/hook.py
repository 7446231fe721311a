"""The import hook: a finder first on ``sys.meta_path`` that serves ``triton`` and its public
submodules (``modules.py``) and says why any other ``triton.*`` is not provided;
``install``/``uninstall``."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
import types
from typing import Any, Optional

from .children import children_no_more, children_too
from .modules import served_modules
from .standin import NOT_PROVIDED_HINT, SERVED, StandInModule

__all__ = ["Finder", "install", "uninstall"]


#: the file ``triton.__file__`` names: this package's ``__init__.py``
SERVED_FROM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__init__.py")

#: what to do instead, for the parts of Triton a program may reach for that anytile leaves out
_INSTEAD = {
    "triton._C": "they are Triton's C++ internals (its MLIR IR, passes and drivers): a program "
                 "that builds or reads Triton IR needs the real Triton; anytile's own IR of a "
                 "kernel is anytile.compile(kernel, target, signature).asm['ir']",
}


def _module_not_provided(name: str) -> str:
    """Why ``import name`` fails: an ``ImportError`` rather than ``ModuleNotFoundError``,
    so that ``from pkg import name`` keeps this message instead of Python's bare one."""
    instead = next((why for prefix, why in _INSTEAD.items()
                    if name == prefix or name.startswith(prefix + ".")), None)
    if instead is not None:
        return f"No module named '{name}': anytile does not provide it; {instead}"
    return f"No module named '{name}': anytile does not provide it ({NOT_PROVIDED_HINT})"


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``triton`` and its public submodules; any other ``triton.*`` is not provided."""

    def __init__(self) -> None:
        self.builders = served_modules()
        SERVED.update(self.builders)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "triton" and not name.startswith("triton."):
            return None
        if name not in self.builders:
            extra = os.environ.get("ANYTILE_TRITON_SOURCE")
            if extra:                  # a module of the user's Triton checkout, not served
                path = os.path.join(extra, *name.split(".")) + ".py"
                if os.path.isfile(path):
                    return importlib.util.spec_from_file_location(name, path)
            raise ImportError(_module_not_provided(name), name=name)
        if name != "triton":
            return importlib.util.spec_from_loader(name, self)
        # a real file for `triton.__file__` (programs take its folder): the package whose
        # docstring lists what is served
        spec = importlib.util.spec_from_loader(name, self, origin=SERVED_FROM)
        spec.has_location = True
        return spec

    def create_module(self, spec: Any) -> types.ModuleType:
        return self.builders[spec.name]()

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__spec__.name == "triton.language":   # as Triton's package does on import
            importlib.import_module("triton.language.core")


def install(device: Optional[str] = None) -> None:
    """Make ``import triton`` (and its public submodules) give anytile, on ``device`` when
    given (it becomes the default device, as ``ANYTILE_DEVICE`` does), in this process and in
    the Python interpreters it starts (``ANYTILE_AS_TRITON`` and a ``sitecustomize`` first on
    ``PYTHONPATH``: ``multiprocessing`` spawn and forkserver workers, subprocesses).  A real
    Triton already imported in this process is an error: the two cannot share ``sys.modules``."""
    import anytile as at
    if device is not None:
        at.device(device)                 # an unknown or unusable device is said here
        os.environ["ANYTILE_DEVICE"] = device
    loaded = sys.modules.get("triton")
    if loaded is not None and not isinstance(loaded, StandInModule):
        raise at.AnytileError("the real triton is already imported in this process: install "
                              "the anytile stand-in before the program's first 'import triton'")
    if not any(isinstance(f, Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, Finder())
    children_too()
    from ..language import objects
    objects.REPR_PREFIX[0] = "triton.language"


def uninstall() -> None:
    """Remove the hook and the stand-in modules it served (child interpreters started from
    now on import their own ``triton``, if any)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, Finder)]
    children_no_more()
    from ..language import objects
    objects.REPR_PREFIX[0] = "tl"
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        if isinstance(sys.modules[name], StandInModule) or name.startswith("triton.language"):
            del sys.modules[name]


