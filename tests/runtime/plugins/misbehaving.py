"""Test plugins that misbehave in ways a real one might: discovery must isolate them."""
import threading

from numpy_source_backend import NumpySourceBackend


class HangingDevices(NumpySourceBackend):
    """``devices()`` never returns (a driver stuck probing hardware)."""

    name = "hanging"
    device_prefix = "hanging"

    def devices(self):
        threading.Event().wait()     # never set
        return []


class RaisingHostDevices(NumpySourceBackend):
    """A host-memory plugin whose ``devices()`` raises."""

    name = "raising-host"
    device_prefix = "raisinghost"
    host_memory = True

    def devices(self):
        raise RuntimeError("devices() is broken on purpose")
