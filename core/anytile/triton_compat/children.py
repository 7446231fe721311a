"""Child Python interpreters (``multiprocessing`` spawn and forkserver workers, torch's compile
workers, subprocesses) serve ``import triton`` as the process that started them does: a
``sitecustomize`` first on ``PYTHONPATH`` installs the hook at their first ``import triton``."""
from __future__ import annotations

import os
import sys

__all__ = ["CHILD_ENV", "children_too", "children_no_more"]


#: set (to "1") by ``install``: a Python started by this process serves ``import triton`` too
CHILD_ENV = "ANYTILE_AS_TRITON"

#: the ``sitecustomize`` that ``install`` puts first on ``PYTHONPATH`` for child interpreters
#: (Python runs it at startup): with ``ANYTILE_AS_TRITON`` set, the first ``import triton``
#: installs anytile's (anytile is imported only then); any other ``sitecustomize`` on the path
#: still runs after it
_STARTUP_SOURCE = '''\
"""Written by anytile.triton_compat.install: with ANYTILE_AS_TRITON set, the first
`import triton` in this interpreter installs anytile's triton, as in the process that
started it."""
import importlib.machinery
import importlib.util
import os
import sys


class _AnytileTritonOnFirstImport:
    def find_spec(self, name, path=None, target=None):
        if name != "triton" and not name.startswith("triton."):
            return None
        sys.meta_path.remove(self)
        try:
            from anytile.triton_compat import install
        except ImportError:          # a Python without anytile: its own triton, or none
            return None
        install()
        return sys.meta_path[0].find_spec(name, path, target)


def _next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if os.environ.get("ANYTILE_AS_TRITON") and "triton" not in sys.modules:
    sys.meta_path.insert(0, _AnytileTritonOnFirstImport())
    # workers start many at once (torch's compile workers: one a core), each loading its
    # GPU driver: a plugin is given two minutes before it counts as hung
    os.environ.setdefault("ANYTILE_PLUGIN_TIMEOUT", "120")
_next_sitecustomize()
'''


def _startup_folder() -> str:
    """The folder holding the child interpreters' ``sitecustomize`` (written when missing or
    out of date): under anytile's cache folder, else a private temporary folder."""
    import tempfile
    from ..runtime.cache import cache_dir
    base = cache_dir()
    folder = str(base / "triton-startup") if base is not None else \
        tempfile.mkdtemp(prefix="anytile-triton-startup-")
    path = os.path.join(folder, "sitecustomize.py")
    try:
        with open(path) as f:
            if f.read() == _STARTUP_SOURCE:
                return folder
    except OSError:
        pass
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(_STARTUP_SOURCE)
        os.replace(tmp, path)                # whole, never half-written, for a racing child
    except BaseException:
        os.unlink(tmp)
        raise
    return folder


def children_too() -> None:
    """Child Python interpreters (``multiprocessing`` spawn and forkserver workers, torch's
    compile workers, subprocesses) serve ``import triton`` as this one does."""
    os.environ[CHILD_ENV] = "1"
    folder = _startup_folder()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder] + paths)
    if folder not in sys.path:       # for launchers that pass on sys.path (torch's workers)
        sys.path.insert(1 if sys.path else 0, folder)   # the script's folder stays first


def children_no_more() -> None:
    os.environ.pop(CHILD_ENV, None)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    kept = [p for p in paths if not os.path.isfile(os.path.join(p, "sitecustomize.py"))
            or not _is_startup_file(os.path.join(p, "sitecustomize.py"))]
    if kept:
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        os.environ.pop("PYTHONPATH", None)
    sys.path[:] = [p for p in sys.path if not _is_startup_file(os.path.join(p, "sitecustomize.py"))]


def _is_startup_file(path: str) -> bool:
    try:
        with open(path) as f:
            return f.read() == _STARTUP_SOURCE
    except OSError:
        return False


