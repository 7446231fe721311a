"""The on-disk compile cache: kernels compiled by one process are loaded, not recompiled, by
the next.

Only backends declaring ``Backend.disk_cacheable`` take part (their ``load`` needs nothing
but ``asm``, ``metadata`` and ``signature``).

* Where: ``$ANYTILE_CACHE_DIR``, else ``$XDG_CACHE_HOME/anytile``, else ``~/.cache/anytile``.
  ``ANYTILE_CACHE_DIR=`` (set, empty) or ``ANYTILE_NO_CACHE=1`` turns it off.
* Key: a SHA-256 over anytile's version and the size and modification time of every source
  file of anytile and of the backend's package (so an edited checkout never reuses stale
  code), ``Backend.cache_facts`` (tool versions), the kernel's dependencies
  (``dependencies.scan``: its source, that of every jit function it reaches and the global
  values they read; a kernel reading a value no other process can name is not cached), the
  parameter types, constexprs, attributes, options and target.
* Entry: one JSON file per key (texts as they are, bytes in base64, the metadata) with a
  SHA-256 checksum of that content.  It is written to a temporary file and renamed into place,
  so concurrent processes never see half an entry; an entry that cannot be read or parsed, or
  whose content no longer matches its checksum (truncated, edited), counts as a miss and is
  written over.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional

from ..version import __version__
from .dependencies import scan

_CORE_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = ["cache_dir", "kernel_key", "load_entry", "store_entry", "write_atomically"]

_FORMAT = 2


def cache_dir() -> Optional[Path]:
    """The cache folder, or ``None`` when the cache is off."""
    if os.environ.get("ANYTILE_NO_CACHE", "") not in ("", "0"):
        return None
    explicit = os.environ.get("ANYTILE_CACHE_DIR")
    if explicit is not None:
        return Path(explicit) if explicit else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "anytile"


@functools.lru_cache(maxsize=None)
def _source_fingerprint(folder: str) -> str:
    """Every ``.py`` file under ``folder``: relative path, size, modification time."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                try:
                    stat = os.stat(path)
                except OSError:
                    continue
                digest.update(f"{os.path.relpath(path, folder)} {stat.st_size} "
                              f"{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _backend_folder(backend: Any) -> Optional[str]:
    """The folder of the backend's own modules (a namespace package has no ``__file__``:
    use the module defining the backend class, and its siblings)."""
    module = sys.modules.get(type(backend).__module__)
    path = getattr(module, "__file__", None)
    return os.path.dirname(path) if path else None


def kernel_key(request: Any) -> Optional[str]:
    """The cache key of one compile (a ``CompileRequest``; see the module docstring);
    ``None`` when the kernel reads something a key cannot capture."""
    source, backend, spec = request.source, request.backend, request.spec
    dependencies = scan(source)
    if not dependencies.portable:
        return None
    backend_folder = _backend_folder(backend)
    parts = [
        f"format {_FORMAT}", f"anytile {__version__}", _source_fingerprint(_CORE_FOLDER),
        f"backend {type(backend).__module__}.{type(backend).__qualname__} {backend.name}",
        _source_fingerprint(backend_folder) if backend_folder else "",
        backend.cache_facts(request.target),
        f"kernel {source.__name__} {dependencies.portable_key} {source.fn.__code__.co_filename}:"
        f"{source.fn.__code__.co_firstlineno}",
        "types " + ", ".join(f"{k}: {v}" for k, v in spec.arg_types.items()),
        "constexprs " + ", ".join(f"{k}={type(v).__qualname__}:{v!r}"
                                  for k, v in sorted(spec.constexprs.items())),
        "attrs " + repr(sorted((k, sorted(v.items())) for k, v in spec.arg_attrs.items())),
        f"options {request.options!r}", f"target {request.target}",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _entry_path(folder: Path, key: str) -> Path:
    return folder / "kernels" / key[:2] / f"{key}.json"


def _checksum(key: str, items: list, metadata: Any) -> str:
    body = json.dumps([key, items, metadata], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def load_entry(folder: Path, key: str) -> Optional[tuple[dict[str, Any], dict[str, Any]]]:
    """``(asm, metadata)`` stored under ``key``, or ``None`` (missing, unreadable, corrupt,
    or not matching its checksum)."""
    try:
        with open(_entry_path(folder, key), encoding="utf-8") as f:
            entry = json.load(f)
        if entry.get("format") != _FORMAT or entry.get("key") != key:
            return None
        items, metadata = entry["asm"], entry["metadata"]
        if entry.get("sha256") != _checksum(key, items, metadata):
            return None
        asm = {name: base64.b64decode(item["base64"]) if "base64" in item else item["text"]
               for name, item in items}
        if not isinstance(metadata, dict) or not isinstance(asm.get("ir"), str):
            return None
        return asm, metadata
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store_entry(folder: Path, key: str, asm: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Write an entry atomically; ``False`` when it cannot be (a value JSON cannot hold, a
    read-only folder): the cache is an optimisation, never an error."""
    items = []
    for name, value in asm.items():
        if isinstance(value, bytes):
            items.append([name, {"base64": base64.b64encode(value).decode("ascii")}])
        elif isinstance(value, str):
            items.append([name, {"text": str(value)}])
        else:
            return False
    try:
        metadata = json.loads(json.dumps(dict(metadata)))    # as a reader will see it
        text = json.dumps({"format": _FORMAT, "key": key, "asm": items, "metadata": metadata,
                           "sha256": _checksum(key, items, metadata)})
    except (TypeError, ValueError):
        return False
    return write_atomically(_entry_path(folder, key), text)


def write_atomically(path: Any, text: str) -> bool:
    """Write ``text`` to ``path`` through a temporary file renamed into place, so a reader
    never sees half of it; ``False`` when it cannot be (a full disk, a read-only folder),
    and the temporary file is removed whatever happened."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.stem[:16]}-", suffix=".tmp",
                                             dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(exc, OSError):
            return False
        raise
    return True
