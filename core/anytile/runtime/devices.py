"""Devices: ``at.device("cuda:0")``, ``at.devices()`` and the default device."""
from __future__ import annotations

import os
from typing import Any, Optional, Union

from ..backend import Backend, DeviceInfo
from ..errors import BackendError
from .discovery import discover, generation, get_backend

__all__ = ["Device", "device", "devices", "default_device", "REFERENCE_BACKEND"]

#: the reference interpreter ships in core; it is the fallback host device
REFERENCE_BACKEND = "interpreter"


class Device:
    """One device of one backend.  ``str(device)`` is its name, e.g. ``cpu:0``."""

    __slots__ = ("backend", "info")

    def __init__(self, backend: Backend, info: DeviceInfo) -> None:
        self.backend = backend
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def type(self) -> str:
        return self.backend.device_prefix

    @property
    def index(self) -> int:
        return self.info.index

    @property
    def properties(self) -> dict[str, Any]:
        """What the backend reports: multiprocessor count, warp size, shared memory, ..."""
        return self.info.props

    def synchronize(self) -> None:
        self.backend.synchronize(self.info)

    def __str__(self) -> str:
        return self.info.name

    def __repr__(self) -> str:
        return f"device('{self.info.name}')"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other.info.name == self.info.name

    def __hash__(self) -> int:
        return hash(self.info.name)


_device_cache: dict[str, Device] = {}


def devices() -> list[Device]:
    """Every usable device of every usable backend."""
    out = []
    for name, record in sorted(discover().items()):
        out.extend(_device(record.backend, info) for info in record.devices)
    return out


def _device(backend: Backend, info: DeviceInfo) -> Device:
    dev = _device_cache.get(info.name)
    if dev is None or dev.backend is not backend:
        dev = _device_cache[info.name] = Device(backend, info)
    return dev


def device(spec: Union[str, Device, None] = None) -> Device:
    """The device named ``spec``: ``"cpu:0"``, ``"cuda:1"``, a prefix alone (``"cuda"`` is
    index 0), or a backend name (``"nvidia"``).  ``None`` gives the default device."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        return default_device()
    if not isinstance(spec, str):
        raise TypeError(f"a device is named by a string such as 'cpu:0', got {spec!r}")
    prefix, _, index_text = spec.partition(":")
    try:
        index = int(index_text) if index_text else 0
    except ValueError:
        raise BackendError(f"device '{spec}': the part after ':' must be an index") from None
    records = discover()
    named = records.get(prefix)
    # a backend named as the prefix owns it (discovery refuses any other that claims it), so
    # the others are not imported: a plugin that hangs at import costs only its own users
    candidates = [named] if named is not None else \
        [r for r in records.values() if r.backend is not None and r.backend.device_prefix == prefix]
    if not candidates:
        known = sorted({r.backend.device_prefix for r in records.values() if r.backend} |
                       set(records))
        raise BackendError(f"no backend provides device '{spec}' (known: {', '.join(known)})")
    reasons = []
    for record in candidates:
        backend = get_backend(record.name)
        avail = record.availability
        if not avail.usable:
            reasons.append(f"backend '{record.name}' is not usable here: {avail.reason}")
            continue
        for info in record.devices:
            if info.index == index:
                return _device(backend, info)
        reasons.append(f"backend '{record.name}' has no device with index {index}")
    raise BackendError(f"device '{spec}' is not available: " + "; ".join(reasons))


_default_cache: tuple = (None, -1, None)   # (ANYTILE_DEVICE, discovery generation, device)


def default_device() -> Device:
    """``ANYTILE_DEVICE`` when set; else the first usable host-memory backend other than the
    reference interpreter (by name); else the interpreter."""
    global _default_cache
    env = os.environ.get("ANYTILE_DEVICE")
    cached_env, cached_gen, cached = _default_cache
    if cached is not None and cached_env == env and cached_gen == generation():
        return cached
    dev = _find_default_device(env)
    _default_cache = (env, generation(), dev)
    return dev


def _find_default_device(env: Optional[str]) -> Device:
    if env:
        return device(env)
    # in order, importing no plugin past the first usable host backend
    for name, record in sorted(discover().items()):
        if name == REFERENCE_BACKEND:
            continue
        backend = record.backend
        if backend is not None and backend.host_memory and record.availability.usable:
            infos = record.devices
            if infos:
                return _device(backend, infos[0])
    return device(REFERENCE_BACKEND)
