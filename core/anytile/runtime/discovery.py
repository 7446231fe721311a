"""Backend discovery: every installed plugin of the ``anytile.backends`` entry-point group.

A plugin that fails to import, is not a ``Backend``, declares an API version core does not
support, or raises while being constructed is *recorded* with the reason and never breaks the
others.  ``anytile backends`` prints these records; asking for such a backend raises
``BackendError`` with the same reason."""
from __future__ import annotations

import functools
import importlib.metadata
import threading
from dataclasses import dataclass
from typing import Any, Optional

from ..backend import API_VERSION, SUPPORTED_API_VERSIONS, Availability, Backend
from ..errors import BackendError

GROUP = "anytile.backends"

__all__ = ["GROUP", "PluginRecord", "discover", "get_backend", "register_backend", "list_backends"]


@dataclass
class PluginRecord:
    """What discovery learned about one plugin."""

    name: str
    entry_point: str
    backend: Optional[Backend] = None
    error: str = ""                 # why the plugin cannot be used at all ("" when loaded)
    api_version: Optional[int] = None
    _version: Optional[str] = None
    _availability: Optional[Availability] = None
    _from_entry_point: bool = False   # installed (its version is its distribution's)

    @property
    def version(self) -> str:
        """The version of the distribution declaring the plugin (looked up on first use:
        reading every installed distribution's entry points costs tens of milliseconds on a
        large environment, and launches never need it)."""
        if self._version is None:
            found = _entry_point_versions().get(self.name) if self._from_entry_point else None
            self._version = found or (_safe_version(self.backend) if self.backend else "unknown")
        return self._version

    @version.setter
    def version(self, value: str) -> None:
        self._version = value

    @property
    def loaded(self) -> bool:
        return self.backend is not None

    @property
    def availability(self) -> Availability:
        """Loaded and able to run here (computed once, lazily: it may probe a driver)."""
        if self.backend is None:
            return Availability(False, self.error)
        if self._availability is None:
            try:
                self._availability = self.backend.availability()
            except Exception as exc:  # a plugin's probe must not break discovery
                self._availability = Availability(False, f"availability() raised {_describe(exc)}")
        return self._availability


_lock = threading.Lock()
_records: Optional[dict[str, PluginRecord]] = None
_registered: dict[str, PluginRecord] = {}
_generation = 0   # bumped whenever the set of plugins may have changed


_listeners: list = []   # called whenever the generation changes


def generation() -> int:
    """A number that changes whenever discovery's answer may have changed (for caches)."""
    return _generation


def on_change(callback: Any) -> None:
    """Call ``callback()`` whenever discovery's answer may have changed (caches holding
    backend objects drop them)."""
    _listeners.append(callback)


def _changed() -> None:
    global _generation
    _generation += 1
    for callback in list(_listeners):
        callback()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _load_records(refresh: bool) -> dict[str, PluginRecord]:
    from stevedore import ExtensionManager

    if refresh:  # stevedore keeps entry points per group for the life of the process
        getattr(ExtensionManager, "ENTRY_POINT_CACHE", {}).pop(GROUP, None)
    failures: dict[str, PluginRecord] = {}

    def on_failure(_manager: Any, entry_point: Any, exc: BaseException) -> None:
        failures[entry_point.name] = PluginRecord(
            entry_point.name, entry_point.value, error=f"failed to import: {_describe(exc)}")

    manager = ExtensionManager(GROUP, invoke_on_load=False, on_load_failure_callback=on_failure)
    records: dict[str, PluginRecord] = dict(failures)
    for ext in manager.extensions:
        record = records[ext.name] = _record_for(ext.name, ext.entry_point.value, ext.plugin)
        record._from_entry_point = True
    _entry_point_versions.cache_clear()
    return records


@functools.lru_cache(maxsize=1)
def _entry_point_versions() -> dict[str, str]:
    """Entry-point name -> version of the distribution declaring it (one cheap pass over the
    installed entry points, instead of mapping every installed file to its distribution)."""
    out: dict[str, str] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        if dist is not None:
            out.setdefault(ep.name, dist.version)
    return out


def _safe_version(backend: Backend) -> str:
    try:
        return backend.version()
    except Exception:  # a plugin's bug must not break discovery
        return "unknown"


def _record_for(name: str, where: str, plugin: Any) -> PluginRecord:
    record = PluginRecord(name, where)
    if not (isinstance(plugin, type) and issubclass(plugin, Backend)):
        record.error = f"entry point {where} is not a subclass of anytile.backend.Backend"
        return record
    record.api_version = getattr(plugin, "api_version", None)
    if record.api_version not in SUPPORTED_API_VERSIONS:
        record.error = (f"written for backend API version {record.api_version}, but this anytile "
                        f"supports {sorted(SUPPORTED_API_VERSIONS)} (current {API_VERSION})")
        return record
    try:
        record.backend = plugin()
    except Exception as exc:
        record.error = f"constructing {plugin.__name__} raised {_describe(exc)}"
        return record
    return record


def discover(refresh: bool = False) -> dict[str, PluginRecord]:
    """All plugins by name: installed entry points plus those given to ``register_backend``."""
    global _records
    with _lock:
        if _records is None or refresh:
            _records = _load_records(refresh)
            _changed()
        return {**_records, **_registered}


def register_backend(backend_class: type, name: Optional[str] = None) -> PluginRecord:
    """Make a backend class known without installing it (tests, notebooks); it goes through
    the same checks as an installed plugin."""
    name = name or getattr(backend_class, "name", "") or backend_class.__name__
    record = _record_for(name, f"{backend_class.__module__}:{backend_class.__qualname__}",
                         backend_class)
    _registered[name] = record
    _changed()
    return record


def unregister_backend(name: str) -> None:
    _registered.pop(name, None)
    _changed()


def list_backends() -> list[PluginRecord]:
    """Every discovered plugin, loaded or not, sorted by name."""
    return sorted(discover().values(), key=lambda r: r.name)


def get_backend(name: str) -> Backend:
    """The usable backend called ``name``; ``BackendError`` says why when there is none."""
    records = discover()
    record = records.get(name)
    if record is None:
        known = ", ".join(sorted(records)) or "none"
        raise BackendError(f"no anytile backend named '{name}' is installed (installed: {known})")
    if record.backend is None:
        raise BackendError(f"backend '{name}' cannot be used: {record.error}")
    return record.backend
