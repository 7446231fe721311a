"""The ``nvidia`` dialect's rewrites around the pipelines: loads and stores of boxes made box
ops, and the pipelines' commits and waits made the dialect's where the copy unit or the
warpgroup MMA needs more of them.

* ``box_loads`` (first): a ``load`` or ``store`` that says which box of which array it reads
  or writes (``box`` and ``array``: a block of a tensor descriptor or of a block pointer)
  becomes ``nvidia.box_load`` or ``nvidia.box_store``, which the pipelines copy as boxes;
* ``fence_waits`` (right after the dot pipelines, before the register prefetch puts its loads
  first in the loop bodies): in a kernel with box copies every ``async_commit`` and
  ``async_wait`` becomes ``nvidia.async_commit`` / ``nvidia.async_wait``, which also track the
  copy unit's groups; and the wait a dot pipeline put first in a loop body whose slots the
  warpgroup MMA reads in place (``SharedBufferLayout.async_readers``) fences them for it
  (``proxy_fence``).
"""
from __future__ import annotations

from anytile.codegen.gpu.shared_ops import AsyncCommitOp, AsyncWaitOp, SharedLoadOp
from anytile.ir import ops
from anytile.ir import Function, walk

from ..dialect import BoxCommitOp, BoxCopyOp, BoxLoadOp, BoxStoreOp, FencedWaitOp, refine

__all__ = ["box_loads", "fence_waits"]


def box_loads(fn: Function) -> int:
    """Make every load and store of ``fn`` that says its box a box op; returns how many."""
    count = 0
    for op in walk(fn.body):
        if type(op) is ops.LoadOp and op.box:
            refine(op, BoxLoadOp)
        elif type(op) is ops.StoreOp and op.box:
            refine(op, BoxStoreOp)
        else:
            continue
        count += 1
    return count


def fence_waits(fn: Function) -> int:
    """The commits and waits of ``fn`` made the dialect's (module docstring); returns how
    many."""
    copies = any(isinstance(op, BoxCopyOp) for op in walk(fn.body))
    fenced = set()
    for loop in walk(fn.body):
        body = loop.body if isinstance(loop, ops.ForOp) else None
        if body is not None and body.ops and type(body.ops[0]) is AsyncWaitOp and \
                any(isinstance(v, SharedLoadOp) and v.buffer.type.layout.async_readers
                    for v in body.ops):
            fenced.add(body.ops[0])
    count = 0
    for op in list(walk(fn.body)):
        if type(op) is AsyncWaitOp and (copies or op in fenced):
            refine(op, FencedWaitOp, proxy_fence=op in fenced)
        elif type(op) is AsyncCommitOp and copies:
            refine(op, BoxCommitOp)
        else:
            continue
        count += 1
    return count
