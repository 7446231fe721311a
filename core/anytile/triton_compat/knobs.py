"""``triton.knobs``: anytile's own runtime and compilation knobs under Triton's names, and the
groups Triton's programs and test helpers read."""
from __future__ import annotations

import os
from typing import Any, Optional

from .standin import StandInModule

__all__ = ["knobs_module"]


class _Ptxas:
    """``knobs.nvidia.ptxas``: the ``ptxas`` the nvidia backend uses (``path``, ``None``
    without one) and its CUDA release (``version``, ``"13.0"``; ``"0.0"`` without one)."""

    @property
    def path(self) -> Optional[str]:
        from ..runtime.discovery import discover
        record = discover().get("nvidia")
        found = record.backend.describe().get("ptxas") if record and record.backend else None
        return found if found and os.path.isfile(str(found)) else None

    @property
    def version(self) -> str:
        import re
        import subprocess
        path = self.path
        if path is None:
            return "0.0"
        said = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        found = re.search(r"release (\d+)\.(\d+)", said)
        return f"{found.group(1)}.{found.group(2)}" if found else "0.0"


class _KnobSet:
    """A group of Triton's knobs that anytile has no use for but programs read or set."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def knobs_module() -> StandInModule:
    """``triton.knobs``: anytile's own ``runtime`` (launch hooks) and ``compilation`` (the
    compile listener) knobs, ``nvidia.ptxas`` (path and version) and the names Triton's test
    helpers read (``base_knobs``, ``propagate_env``); the other vendor groups are empty."""
    import anytile as at
    return StandInModule("triton.knobs", {
        "runtime": at.knobs.runtime, "compilation": at.knobs.compilation,
        "nvidia": _KnobSet(ptxas=_Ptxas(), dump_nvptx=False, mock_ptx_version=None),
        "amd": _KnobSet(), "build": _KnobSet(), "cache": _KnobSet(dir=_cache_dir()),
        "base_knobs": _KnobSet, "propagate_env": False})


def _cache_dir() -> Optional[str]:
    """anytile's on-disk kernel cache folder (``None`` when the cache is off)."""
    from ..runtime.cache import cache_dir
    found = cache_dir()
    return str(found) if found is not None else None

