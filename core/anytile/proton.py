"""Triton's profiler API (``triton.profiler``, "proton") over anytile's launch hooks.

    import anytile.proton as proton           # what `import triton.profiler` gives as Triton
    proton.start("matmul", hook="triton")
    with proton.scope("torch", {"flops16": 2 * M * N * K}):
        run_torch()
    run_my_kernels()                           # each launch: a node named by launch_metadata
    proton.finalize()                          # writes matmul.hatchet (JSON)
    tree, metrics = proton.viewer.parse(["time/ms", "tflop16/s"], "matmul.hatchet")
    proton.viewer.print_tree(tree, metrics)

A session records, while active (``activate``/``deactivate``), each anytile launch with its
device time (``Backend.timer``: CUDA events on NVIDIA, the host clock around a synchronize
elsewhere) and the counters of its ``@jit(launch_metadata=...)`` (``flops8``, ``flops16``,
``flops32``, ``bytes``...), under the scopes open at the time.  A scope's own time is its
device-timer interval, so work anytile does not launch (torch's, cuBLAS's) counts there too,
on the stream the timer records on.  Timing waits for each launch: profiling serialises the
work it measures.  Not provided: proton's hardware counters, instrumentation mode, context
from Python call stacks (``context="python"``), and sessions other than one at a time."""
from __future__ import annotations

import contextlib
import json
import types
from typing import Any, Optional, Sequence

from .runtime.hooks import LaunchInfo, knobs

__all__ = ["start", "activate", "deactivate", "finalize", "scope", "enter_scope",
           "exit_scope", "viewer"]


class _Node:
    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind
        self.metrics: dict[str, float] = {"count": 0, "time (ns)": 0.0}
        self.children: dict[str, _Node] = {}

    def child(self, name: str, kind: str) -> "_Node":
        if name not in self.children:
            self.children[name] = _Node(name, kind)
        return self.children[name]

    def add(self, metrics: dict[str, Any]) -> None:
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.metrics[k] = self.metrics.get(k, 0) + v

    def to_json(self) -> dict[str, Any]:
        return {"frame": {"name": self.name, "type": self.kind}, "metrics": self.metrics,
                "children": [c.to_json() for c in self.children.values()]}


class _Session:
    def __init__(self, name: str) -> None:
        self.name = name
        self.root = _Node("ROOT", "function")
        self.stack = [self.root]
        self.active = True
        self.open: dict[int, Any] = {}
        self.saved: Optional[tuple] = None

    # the launch hooks (chained onto whatever was set before)
    def enter(self, info: LaunchInfo) -> None:
        if self.saved and self.saved[0] is not None:
            self.saved[0](info)
        if self.active:
            timer = info.device.backend.timer(info.device.info)
            self.open[id(info)] = timer
            timer.start()

    def leave(self, info: LaunchInfo) -> None:
        timer = self.open.pop(id(info), None)
        if timer is not None:
            timer.stop()
            meta = info.metadata
            node = self.stack[-1].child(str(meta.get("name", info.name)), "kernel")
            node.add({k: v for k, v in meta.items() if k != "name"})
            node.add({"count": 1, "time (ns)": timer.elapsed_ms() * 1e6})
        if self.saved and self.saved[1] is not None:
            self.saved[1](info)


_session: Optional[_Session] = None


def start(name: str = "proton", *, context: str = "shadow", data: str = "tree",
          backend: Optional[str] = None, mode: Any = None, hook: Optional[str] = None) -> int:
    """Begin recording (session 0) into ``name``.hatchet, written by ``finalize``."""
    global _session
    if _session is not None:
        finalize()
    if context not in ("shadow", "python") or data != "tree":
        raise ValueError(f"anytile's proton records a tree of scopes (context='shadow', "
                         f"data='tree'), got context={context!r}, data={data!r}")
    _session = _Session(name[:-len(".hatchet")] if name.endswith(".hatchet") else name)
    runtime = knobs.runtime
    _session.saved = (runtime.launch_enter_hook, runtime.launch_exit_hook)
    runtime.launch_enter_hook, runtime.launch_exit_hook = _session.enter, _session.leave
    return 0


def activate(session: Optional[int] = None) -> None:
    """Record again after ``deactivate``."""
    if _session is not None:
        _session.active = True


def deactivate(session: Optional[int] = None) -> None:
    """Stop recording (launches still run) until ``activate``."""
    if _session is not None:
        _session.active = False


def finalize(session: Optional[int] = None, output_format: str = "hatchet") -> None:
    """Stop the session and write ``NAME.hatchet``."""
    global _session
    s, _session = _session, None
    if s is None:
        return
    knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook = s.saved
    with open(f"{s.name}.hatchet", "w", encoding="utf-8") as f:
        json.dump([s.root.to_json()], f)


def enter_scope(name: str, *, metrics: Optional[dict[str, Any]] = None) -> Any:
    s = _session
    if s is None or not s.active:
        return None
    node = s.stack[-1].child(name, "scope")
    s.stack.append(node)
    timer = _scope_timer()
    if timer is not None:
        timer.start()
    return (node, timer, dict(metrics or {}))


def exit_scope(token: Any = None) -> None:
    s = _session
    if s is None or token is None:
        return
    node, timer, metrics = token
    if s.stack and s.stack[-1] is node:
        s.stack.pop()
    if timer is not None:
        timer.stop()
        node.add({"time (ns)": timer.elapsed_ms() * 1e6})
    node.add({"count": 1, **metrics})


def _scope_timer() -> Any:
    from .runtime.devices import default_device
    dev = default_device()
    return dev.backend.timer(dev.info)


class scope(contextlib.ContextDecorator):
    """``with proton.scope(name, metrics):`` (or ``@proton.scope(name)``): a node of the tree;
    ``metrics`` (such as ``{"flops16": ..., "bytes": ...}``) add to it each time."""

    def __init__(self, name: str, metrics: Optional[dict[str, Any]] = None) -> None:
        self.name, self.metrics = name, metrics
        self._tokens: list = []

    def __enter__(self) -> "scope":
        self._tokens.append(enter_scope(self.name, metrics=self.metrics))
        return self

    def __exit__(self, *exc: Any) -> None:
        exit_scope(self._tokens.pop())


# -- the viewer ------------------------------------------------------------------------------
_FLOPS = {"tflop8/s": ("flops8", 1e12), "tflop16/s": ("flops16", 1e12),
          "tflop32/s": ("flops32", 1e12), "tflop64/s": ("flops64", 1e12),
          "gflop8/s": ("flops8", 1e9), "gflop16/s": ("flops16", 1e9),
          "gflop32/s": ("flops32", 1e9), "tflop/s": ("flops", 1e12), "gflop/s": ("flops", 1e9)}
_TIMES = {"time/s": 1e9, "time/ms": 1e6, "time/us": 1e3, "time/ns": 1.0}


def _inclusive(node: dict[str, Any]) -> dict[str, float]:
    """Metrics with kernel time summed into scopes that timed nothing themselves."""
    kids = [_inclusive(c) for c in node["children"]]
    out = dict(node["metrics"])
    if not out.get("time (ns)"):
        out["time (ns)"] = sum(k.get("time (ns)", 0.0) for k in kids)
    for k in kids:
        for name, v in k.items():
            if name.startswith("flops") or name == "bytes":
                out.setdefault(name, 0)
                if not node["metrics"].get(name):
                    out[name] += v
    node["inclusive"] = out
    return out


def _derive(m: dict[str, float], name: str) -> Optional[float]:
    ns = m.get("time (ns)", 0.0)
    if name in _TIMES:
        return ns / _TIMES[name]
    if name in _FLOPS:
        key, unit = _FLOPS[name]
        return m.get(key, 0.0) / (ns * 1e-9) / unit if ns else None
    if name in ("gbyte/s", "tbyte/s"):
        return m.get("bytes", 0.0) / (ns * 1e-9) / (1e9 if name[0] == "g" else 1e12) \
            if ns else None
    return m.get(name)


def parse(metrics: Sequence[str], filename: str, include: Any = None, exclude: Any = None,
          threshold: Any = None) -> tuple[dict[str, Any], list[str]]:
    """Read ``filename`` (``finalize``'s output): the tree and the metric names to show."""
    with open(filename, encoding="utf-8") as f:
        roots = json.load(f)
    for r in roots:
        _inclusive(r)
    return {"roots": roots}, list(metrics)


def print_tree(tree: dict[str, Any], metrics: Sequence[str], depth: int = 100,
               format: Any = None, print_sorted: bool = False) -> None:
    """Print each node with its metrics, children indented under it."""
    def show(node: dict[str, Any], prefix: str, level: int) -> None:
        m = node["inclusive"]
        values = []
        for name in metrics:
            v = _derive(m, name)
            values.append(f"{v:.3f} {name}" if v is not None else f"- {name}")
        print(f"{prefix}{'  '.join(values)}  {node['frame']['name']}")
        kids = node["children"]
        if print_sorted:
            kids = sorted(kids, key=lambda c: -c["inclusive"].get("time (ns)", 0.0))
        if level < depth:
            for c in kids:
                show(c, prefix + "  ", level + 1)
    for r in tree["roots"]:
        show(r, "", 0)


viewer = types.SimpleNamespace(parse=parse, print_tree=print_tree)

