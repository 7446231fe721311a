"""Backend discovery: every installed plugin of the ``anytile.backends`` entry-point group.

Stevedore lists the entry points; each plugin is then imported, constructed and probed
(``availability()``, ``devices()``) on its own, inside a time limit (``ANYTILE_PLUGIN_TIMEOUT``
seconds, default 10): a plugin that fails to import (even by ``sys.exit()``), is not a
``Backend``, declares an API version core does not support, raises, or hangs is *recorded*
with the reason and never stops the others.  ``anytile backends`` prints these records;
asking for such a backend raises ``BackendError`` with the same reason."""
from __future__ import annotations

import functools
import importlib.metadata
import os
import threading
from dataclasses import dataclass
from typing import Any, Optional

from ..backend import API_VERSION, SUPPORTED_API_VERSIONS, Availability, Backend
from ..errors import BackendError

GROUP = "anytile.backends"

__all__ = ["GROUP", "PluginRecord", "discover", "get_backend", "register_backend", "list_backends",
           "probe"]


class ProbeFailed(Exception):
    """A plugin's import, constructor or probe raised or did not return in time."""


def _time_limit() -> float:
    try:
        return max(0.1, float(os.environ.get("ANYTILE_PLUGIN_TIMEOUT", "10")))
    except ValueError:
        return 10.0


def probe(what: str, fn: Any) -> Any:
    """``fn()`` run on a helper thread for at most ``ANYTILE_PLUGIN_TIMEOUT`` seconds; its
    exception (any ``BaseException`` but ``KeyboardInterrupt``: ``sys.exit()`` in a plugin
    included) or its hang becomes ``ProbeFailed`` naming ``what``.  A hung thread is left to
    finish on its own (a daemon: it never holds the process open)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 -- a plugin may even call sys.exit()
            outcome["error"] = exc

    seconds = _time_limit()
    worker = threading.Thread(target=run, name=f"anytile plugin probe: {what}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise ProbeFailed(f"{what} did not return within {seconds:g} s (ANYTILE_PLUGIN_TIMEOUT)")
    if "error" in outcome:
        exc = outcome["error"]
        if isinstance(exc, KeyboardInterrupt):
            raise exc
        raise ProbeFailed(f"{what} raised {_describe(exc)}")
    return outcome["value"]


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
    _devices: tuple = ()

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
        """Loaded, able to run here and listing its devices (computed once, lazily: it may
        probe a driver; a probe that raises or hangs makes the plugin unusable, with why)."""
        if self.backend is None:
            return Availability(False, self.error)
        if self._availability is None:
            backend = self.backend
            try:
                availability = probe(f"{self.name}: availability()", backend.availability)
                if availability.usable:
                    self._devices = list(probe(f"{self.name}: devices()", backend.devices))
            except ProbeFailed as exc:
                availability = Availability(False, str(exc))
            self._availability = availability
        return self._availability

    @property
    def devices(self) -> list:
        """The devices of a usable plugin (``[]`` otherwise), probed once."""
        return list(self._devices) if self.availability.usable else []


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
    # stevedore lists the entry points; each is imported here, alone, so that one plugin's
    # failure (even SystemExit) or hang is recorded instead of stopping the others
    listing = ExtensionManager.make_test_instance([], namespace=GROUP).list_entry_points()
    records: dict[str, PluginRecord] = {}
    for entry_point in listing:
        name, where = entry_point.name, entry_point.value
        if name in records:
            continue
        try:
            plugin = probe(f"importing {where}", entry_point.load)
        except ProbeFailed as exc:
            records[name] = PluginRecord(name, where, error=f"failed to import: {exc}")
            continue
        record = records[name] = _record_for(name, where, plugin)
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
        record.backend = probe(f"constructing {plugin.__name__}", plugin)
    except ProbeFailed as exc:
        record.error = str(exc)
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
