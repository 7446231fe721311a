"""The memory one launch may touch: the bytes of its pointer arguments' buffers.

A pointer is a flat address (``Buffer.address`` plus a byte offset), held as ``uint64``.  A
load, store or atomic finds, for each active lane, the argument whose bytes hold the whole
element; an address in no argument's bytes raises ``OutOfBoundsError`` naming the kernel's
line (this backend reads and writes only the memory its launch was given)."""
from __future__ import annotations

from typing import Any

import numpy as np

from anytile.errors import LaunchError, OutOfBoundsError

__all__ = ["Memory"]


class Memory:
    """The byte spans of a launch's pointer arguments, each a ``uint8`` array at an address."""

    def __init__(self, spans: dict[int, np.ndarray]) -> None:
        self.spans = [(address, span) for address, span in spans.items()]

    def _offsets(self, addresses: np.ndarray, nbytes: int, op: Any) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``(lanes, span, byte offsets)`` per argument holding some of ``addresses``."""
        addresses = addresses.astype(np.uint64)
        left = np.ones(addresses.shape, bool)
        found = []
        for start, span in self.spans:
            inside = left & (addresses >= np.uint64(start)) & \
                (addresses + np.uint64(nbytes) <= np.uint64(start + span.size))
            if inside.any():
                lanes = np.nonzero(inside)[0]
                found.append((lanes, span, (addresses[lanes] - np.uint64(start)).astype(np.int64)))
                left &= ~inside
        if left.any():
            bad = int(addresses[np.nonzero(left)[0][0]])
            raise OutOfBoundsError(f"out-of-bounds {op.NAME} at address {bad:#x}: not in the "
                                   f"memory of any pointer argument of the launch", op.loc)
        return found

    def read(self, addresses: np.ndarray, dtype: np.dtype, op: Any) -> np.ndarray:
        """The elements of ``dtype`` at the 1-D ``addresses``."""
        out = np.empty(addresses.shape, dtype)
        width = np.arange(dtype.itemsize)
        for lanes, span, offsets in self._offsets(addresses, dtype.itemsize, op):
            raw = np.ascontiguousarray(span[offsets[:, None] + width])
            out[lanes] = raw.view(dtype).reshape(-1)
        return out

    def write(self, addresses: np.ndarray, values: np.ndarray, op: Any) -> None:
        """Store ``values`` at the 1-D ``addresses`` (for two lanes at one address, the later
        lane in row-major order wins)."""
        values = np.ascontiguousarray(values)
        raw = values.view(np.uint8).reshape(values.size, values.dtype.itemsize)
        width = np.arange(values.dtype.itemsize)
        for lanes, span, offsets in self._offsets(addresses, values.dtype.itemsize, op):
            if not span.flags.writeable:
                raise LaunchError(f"{op.NAME} into a read-only array", op.loc)
            span[offsets[:, None] + width] = raw[lanes]
