"""Backend discovery: every installed plugin of the ``anytile.backends`` entry-point group.

Stevedore lists the entry points; nothing is imported then.  A plugin is imported,
constructed and checked the first time something asks for it (its backend object, its
devices, or a listing of every plugin), so a plugin that is slow or hangs at import costs
only the processes that need it.  Each step (import, constructor, ``availability()``,
``devices()``) runs inside a time limit (``ANYTILE_PLUGIN_TIMEOUT`` seconds, default 10;
a step still using the CPU then is slow, not hung, and is waited for up to ten times as long).
A plugin that fails to import (even by ``sys.exit()``), is not a ``Backend``, declares an API
version core does not support, raises, hangs, or answers with something other than the
contract's types is *recorded* with the reason and never stops the others.

Clashes are named, never settled silently:

* two distributions declaring the same backend name: neither is used (anytile cannot tell
  which one is meant), unless one of them is core's own, which is kept;
* a ``device_prefix`` that is another backend's name: that backend owns the prefix, the
  other is not used;
* two backends with the same ``device_prefix`` (neither named after it): neither is used.

``anytile backends`` prints these records; asking for such a backend raises
``BackendError`` with the same reason."""
from __future__ import annotations

import functools
import importlib.metadata
import os
import threading
import time
from typing import Any, Callable, Optional

from ..backend import API_VERSION, SUPPORTED_API_VERSIONS, Availability, Backend, DeviceInfo
from ..errors import BackendError

GROUP = "anytile.backends"
#: the top-level package of core: its own entry point wins a name clash
CORE_PACKAGE = "anytile"

__all__ = ["GROUP", "PluginRecord", "discover", "get_backend", "register_backend", "list_backends",
           "probe"]


class ProbeFailed(Exception):
    """A plugin's import, constructor or probe raised or did not return in time."""


def _time_limit() -> float:
    try:
        return max(0.1, float(os.environ.get("ANYTILE_PLUGIN_TIMEOUT", "10")))
    except ValueError:
        return 10.0


#: a probe still using the CPU at its time limit is slow (a loaded machine, many processes
#: importing at once), not hung: it is waited for while it works, up to this many limits
BUSY_LIMITS = 10


def _cpu_seconds(thread: threading.Thread) -> Optional[float]:
    """The CPU time ``thread`` has used (``None`` where the system does not say)."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (AttributeError, OSError, TypeError, ValueError):
        return None


def probe(what: str, fn: Any) -> Any:
    """``fn()`` run on a helper thread for at most ``ANYTILE_PLUGIN_TIMEOUT`` seconds; its
    exception (any ``BaseException`` but ``KeyboardInterrupt``: ``sys.exit()`` in a plugin
    included) or its hang becomes ``ProbeFailed`` naming ``what``.  A probe that used the CPU
    in the last half of that time is working, only slowly: it is waited for while it goes on
    working, up to ``BUSY_LIMITS`` times the limit.  A hung thread is left to finish on its
    own (a daemon: it never holds the process open)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 -- a plugin may even call sys.exit()
            outcome["error"] = exc

    seconds = _time_limit()
    worker = threading.Thread(target=run, name=f"anytile plugin probe: {what}", daemon=True)
    start = time.monotonic()
    worker.start()
    samples: list[tuple[float, float]] = []       # (seconds since the start, CPU seconds)
    while True:
        worker.join(seconds / 4)
        if not worker.is_alive():
            break
        waited, used = time.monotonic() - start, _cpu_seconds(worker)
        if used is not None:
            samples.append((waited, used))
        if waited < seconds:
            continue
        before = [u for t, u in samples if t <= waited - seconds / 2]
        working = used is not None and before and used - before[-1] >= 0.001
        if not working:
            raise ProbeFailed(f"{what} did not return within {seconds:g} s "
                              f"(ANYTILE_PLUGIN_TIMEOUT)")
        if waited >= BUSY_LIMITS * seconds:
            raise ProbeFailed(f"{what} was still working after {waited:.0f} s, "
                              f"{BUSY_LIMITS} times ANYTILE_PLUGIN_TIMEOUT")
    if "error" in outcome:
        exc = outcome["error"]
        if isinstance(exc, KeyboardInterrupt):
            raise exc
        raise ProbeFailed(f"{what} raised {_describe(exc)}")
    return outcome["value"]


class PluginRecord:
    """What discovery learned about one plugin.  The plugin is imported and checked on first
    use of ``backend``, ``error``, ``api_version``, ``availability`` or ``devices``."""

    def __init__(self, name: str, entry_point: str, *, loader: Optional[Callable[[], Any]] = None,
                 error: str = "", from_entry_point: bool = False,
                 notes: tuple[str, ...] = ()) -> None:
        self.name = name
        self.entry_point = entry_point
        #: what else discovery has to say (an ignored duplicate of core's entry point)
        self.notes = notes
        self._loader = loader             # imports the plugin class; None once loaded
        self._backend: Optional[Backend] = None
        self._error = error
        self._api_version: Any = None
        self._version: Optional[str] = None
        self._from_entry_point = from_entry_point   # installed: its version is its distribution's
        self._availability: Optional[Availability] = None
        self._devices: tuple[DeviceInfo, ...] = ()
        self._load_lock = threading.RLock()
        self._probe_lock = threading.RLock()

    def __repr__(self) -> str:
        state = "not loaded" if self._loader is not None else (self._error or "loaded")
        return f"PluginRecord({self.name!r}, {self.entry_point!r}, {state})"

    # -- loading -------------------------------------------------------------------------------
    def _load(self) -> None:
        if self._loader is None:
            return
        with self._load_lock:        # a second thread waits for the first one's answer
            loader = self._loader
            if loader is None:
                return
            try:
                plugin = probe(f"importing {self.entry_point}", loader)
            except ProbeFailed as exc:
                self._error = f"failed to import: {exc}"
            else:
                self._adopt(plugin)
            finally:
                self._loader = None

    def _adopt(self, plugin: Any) -> None:
        """Check the plugin class against the contract and construct it."""
        where = self.entry_point
        if not (isinstance(plugin, type) and issubclass(plugin, Backend)):
            self._error = f"entry point {where} is not a subclass of anytile.backend.Backend"
            return
        version = self._api_version = getattr(plugin, "api_version", None)
        problem = _api_version_problem(version)
        if problem:
            self._error = problem
            return
        problem = _prefix_problem(self.name, getattr(plugin, "device_prefix", None))
        if problem:
            self._error = problem
            return
        try:
            self._backend = probe(f"constructing {plugin.__name__}", plugin)
        except ProbeFailed as exc:
            self._error = str(exc)

    @property
    def backend(self) -> Optional[Backend]:
        """The constructed backend, or ``None`` when it cannot be used (see ``error``)."""
        self._load()
        return self._backend

    @property
    def error(self) -> str:
        """Why the plugin cannot be used at all ("" when loaded)."""
        self._load()
        return self._error

    @property
    def api_version(self) -> Any:
        self._load()
        return self._api_version

    @property
    def loaded(self) -> bool:
        return self.backend is not None

    @property
    def version(self) -> str:
        """The version of the distribution declaring the plugin (looked up on first use:
        reading every installed distribution's entry points costs tens of milliseconds on a
        large environment, and launches never need it)."""
        if self._version is None:
            found = None
            if self._from_entry_point:
                found = next((d.version for d in _entry_point_dists().get(self.name, ())
                              if d.value == self.entry_point), None)
            self._version = found or (_safe_version(self.backend) if self.backend else "unknown")
        return self._version

    @version.setter
    def version(self, value: str) -> None:
        self._version = value

    @property
    def distribution(self) -> str:
        """``name version`` of the distribution declaring the plugin ("" when registered in
        the process or not known)."""
        return next((d.label for d in _entry_point_dists().get(self.name, ())
                     if d.value == self.entry_point), "") if self._from_entry_point else ""

    # -- probing -------------------------------------------------------------------------------
    @property
    def availability(self) -> Availability:
        """Loaded, able to run here and listing its devices (computed once, lazily: it may
        probe a driver; a probe that raises, hangs or answers with the wrong type makes the
        plugin unusable, with why)."""
        backend = self.backend
        if backend is None:
            return Availability(False, self._error)
        if self._availability is None:
            with self._probe_lock:
                if self._availability is None:
                    self._availability = self._probe(backend)
        return self._availability

    def _probe(self, backend: Backend) -> Availability:
        try:
            availability = probe(f"{self.name}: availability()", backend.availability)
            if not isinstance(availability, Availability):
                return Availability(False, f"availability() returned {_shown(availability)}; it "
                                           f"must return anytile.backend.Availability(usable, "
                                           f"reason)")
            if not availability.usable:
                return availability
            rivals = _prefix_rivals(self)
            if rivals:
                return Availability(False, _rivals_text(self, rivals))
            devices = probe(f"{self.name}: devices()", backend.devices)
        except ProbeFailed as exc:
            return Availability(False, str(exc))
        problem = _devices_problem(devices, backend.device_prefix)
        if problem:
            return Availability(False, problem)
        self._devices = tuple(devices)
        return availability

    @property
    def devices(self) -> list[DeviceInfo]:
        """The devices of a usable plugin (``[]`` otherwise), probed once."""
        return list(self._devices) if self.availability.usable else []


# -- the contract's answers, checked ------------------------------------------------------------
def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return text if value is None else f"{text} (a {type(value).__name__})"


def _api_version_problem(version: Any) -> str:
    supported = ", ".join(str(v) for v in sorted(SUPPORTED_API_VERSIONS))
    if type(version) is not int:
        return (f"its api_version is {_shown(version)}, not an int: set api_version to the "
                f"backend API version it was written for (this anytile supports {supported})")
    if version in SUPPORTED_API_VERSIONS:
        return ""
    remedy = ("a newer anytile" if version > API_VERSION else "a version of the plugin written "
              f"for API version {API_VERSION}")
    return (f"written for backend API version {version}, but this anytile supports API version "
            f"{supported}: install {remedy}")


def _prefix_problem(name: str, prefix: Any) -> str:
    """Why ``prefix`` cannot name the devices of backend ``name`` ("" when it can)."""
    if not isinstance(prefix, str) or not prefix or ":" in prefix or prefix != prefix.strip():
        return (f"its device_prefix is {_shown(prefix)}: it must be a non-empty word without ':' "
                f"(devices are named PREFIX:INDEX)")
    if prefix == name:
        return ""
    owner = _records_now().get(prefix)
    if owner is None:
        return ""
    return (f"its device_prefix '{prefix}' is the name of the backend '{prefix}' "
            f"({_origin(owner)}), which names its own devices '{prefix}:N': this plugin is not "
            f"used; it must choose another device_prefix")


def _prefix_rivals(record: PluginRecord) -> list[PluginRecord]:
    """Other plugins whose devices carry ``record``'s prefix (each one is loaded to know:
    only asked for a plugin whose prefix is not its own name, which a rival cannot take)."""
    prefix = record.backend.device_prefix if record.backend is not None else None
    if prefix is None or prefix == record.name:
        return []
    return [other for other in _records_now().values() if other is not record
            and other.backend is not None and other.backend.device_prefix == prefix]


def _rivals_text(record: PluginRecord, rivals: list[PluginRecord]) -> str:
    prefix = record.backend.device_prefix if record.backend is not None else "?"
    others = ", ".join(f"'{r.name}' ({_origin(r)})" for r in rivals)
    return (f"its device_prefix '{prefix}' is also the device prefix of backend {others}: "
            f"anytile cannot tell whose '{prefix}:0' is meant, so none of them is used; "
            f"each must choose its own device_prefix")


def _devices_problem(devices: Any, prefix: str) -> str:
    """Why ``devices()``'s answer breaks the contract ("" when it does not)."""
    if not isinstance(devices, (list, tuple)):
        return (f"devices() returned {_shown(devices)}; it must return a list of "
                f"anytile.backend.DeviceInfo")
    seen: set[int] = set()
    for info in devices:
        if not isinstance(info, DeviceInfo):
            return (f"devices() returned an item {_shown(info)}; every item must be an "
                    f"anytile.backend.DeviceInfo")
        if type(info.index) is not int or info.index < 0 or info.index in seen:
            return (f"devices() returned device '{info.name}' with index {_shown(info.index)}; "
                    f"indices are distinct ints from 0")
        if info.name != f"{prefix}:{info.index}":
            return (f"devices() returned a device named {_shown(info.name)} with index "
                    f"{info.index}; a device is named by its backend's device_prefix and its "
                    f"index ('{prefix}:{info.index}')")
        seen.add(info.index)
    return ""


def _origin(record: PluginRecord) -> str:
    label = record.distribution
    return f"{record.entry_point}" + (f" from {label}" if label else "")


# -- the registry ------------------------------------------------------------------------------
_lock = threading.RLock()
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


class _Declaration:
    """One entry point as its distribution declares it."""

    def __init__(self, value: str, dist_name: str, version: str) -> None:
        self.value, self.dist_name, self.version = value, dist_name, version

    @property
    def label(self) -> str:
        return f"{self.dist_name} {self.version}".strip()


@functools.lru_cache(maxsize=1)
def _entry_point_dists() -> dict[str, tuple[_Declaration, ...]]:
    """Entry-point name -> the distributions declaring it (read on first need: one pass over
    every installed distribution's entry points costs tens of milliseconds)."""
    out: dict[str, list[_Declaration]] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        out.setdefault(ep.name, []).append(
            _Declaration(ep.value, dist.metadata["Name"] if dist else "", dist.version if dist else ""))
    return {name: tuple(found) for name, found in out.items()}


def _side(name: str, value: str) -> str:
    found = next((d for d in _entry_point_dists().get(name, ()) if d.value == value), None)
    return f"{value} from {found.label}" if found else value


def _is_core(value: str) -> bool:
    return value.split(":")[0].split(".")[0] == CORE_PACKAGE


def _load_records(refresh: bool) -> dict[str, PluginRecord]:
    from stevedore import ExtensionManager

    if refresh:  # stevedore keeps entry points per group for the life of the process
        getattr(ExtensionManager, "ENTRY_POINT_CACHE", {}).pop(GROUP, None)
        _entry_point_dists.cache_clear()
    listing = ExtensionManager.make_test_instance([], namespace=GROUP).list_entry_points()
    declared: dict[str, dict[str, Any]] = {}    # name -> {value: entry point}, in listing order
    for entry_point in listing:
        declared.setdefault(entry_point.name, {}).setdefault(entry_point.value, entry_point)
    return {name: _record_of_entry_points(name, list(found.values()))
            for name, found in declared.items()}


def _record_of_entry_points(name: str, entry_points: list[Any]) -> PluginRecord:
    """The record of backend ``name``, declared by one entry point or, in a clash, several."""
    if len(entry_points) == 1:
        ep = entry_points[0]
        return PluginRecord(name, ep.value, loader=ep.load, from_entry_point=True)
    sides = [_side(name, ep.value) for ep in entry_points]
    core = [ep for ep in entry_points if _is_core(ep.value)]
    if len(core) == 1:
        ignored = "; ".join(s for ep, s in zip(entry_points, sides) if ep is not core[0])
        note = (f"also declared by {ignored}: ignored, core's own '{name}' is used")
        return PluginRecord(name, core[0].value, loader=core[0].load, from_entry_point=True,
                            notes=(note,))
    return PluginRecord(name, entry_points[0].value, from_entry_point=True,
                        error=f"{len(sides)} installed plugins are named '{name}' ("
                              + "; ".join(sides) + "): anytile cannot tell which one is meant, "
                              "so none is used; uninstall all but one")


def _records_now() -> dict[str, PluginRecord]:
    """Every plugin by name, as ``discover()`` gives them (without refreshing)."""
    with _lock:
        records = _records if _records is not None else {}
        return {**records, **_registered}


def discover(refresh: bool = False) -> dict[str, PluginRecord]:
    """All plugins by name: installed entry points plus those given to ``register_backend``.
    Listing imports nothing; each record imports its plugin when first asked."""
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
    record = PluginRecord(name, f"{backend_class.__module__}:{backend_class.__qualname__}")
    discover()
    record._adopt(backend_class)
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
    """The usable backend called ``name`` (only it is imported); ``BackendError`` says why
    when there is none."""
    records = discover()
    record = records.get(name)
    if record is None:
        known = ", ".join(sorted(records)) or "none"
        raise BackendError(f"no anytile backend named '{name}' is installed (installed: {known})")
    if record.backend is None:
        raise BackendError(f"backend '{name}' cannot be used: {record.error}")
    return record.backend


def _safe_version(backend: Backend) -> str:
    try:
        version = backend.version()
    except Exception:  # a plugin's bug must not break discovery
        return "unknown"
    return version if isinstance(version, str) and version else "unknown"
