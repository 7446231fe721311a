"""What ``anytile run --as-triton`` does from Python: run a program file with ``import triton``
served by anytile."""
from __future__ import annotations

import os
import runpy
import sys
from typing import Optional

from .hook import install

__all__ = ["run_path"]


def run_path(path: str, argv: Optional[list[str]] = None, device: Optional[str] = None) -> None:
    """Run the file at ``path`` as ``__main__`` (as ``python path argv...`` would) with
    ``import triton`` served by anytile."""
    install(device)
    sys.argv = [path] + list(argv or [])
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    runpy.run_path(path, run_name="__main__")
