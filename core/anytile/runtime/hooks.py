"""Launch and compile hooks (``anytile.knobs``), with Triton's names.

* ``knobs.runtime.launch_enter_hook`` / ``launch_exit_hook``: called before and after every
  launch with a ``LaunchInfo`` (the kernel, its ``CompiledKernel``, the device, the grid, the
  stream and the arguments by name);
* ``knobs.compilation.listener``: called after every compile with a ``CompileInfo`` (the
  kernel's name, the ``CompiledKernel``, the time of each stage, whether it came from the
  on-disk cache).

They cost nothing while unset: setting a launch hook empties every kernel's fast-path entries
and keeps new ones from being made, so each launch then takes the general path, which calls
the hooks; unsetting both lets the fast path fill again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

__all__ = ["LaunchInfo", "CompileInfo", "knobs", "set_allocator", "get_allocator",
           "launch_hooks_set", "on_launch_hooks_change", "call_launch_hook",
           "call_compile_listener"]


@dataclass
class LaunchInfo:
    """One launch, as the hooks see it."""

    kernel: Any                      # the JITFunction
    compiled: Any                    # its CompiledKernel
    device: Any                      # the Device
    grid: tuple[int, int, int]
    stream: Any
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.compiled.name

    @property
    def metadata(self) -> dict[str, Any]:
        """The kernel's ``launch_metadata(grid, kernel, args)`` (``@jit(launch_metadata=)``),
        computed once; ``{"name": ...}`` without one."""
        made = self.__dict__.get("_metadata")
        if made is None:
            fn = getattr(self.kernel, "launch_metadata", None)
            made = dict(fn(self.grid, self.compiled, self.args) or {}) if fn else {}
            made.setdefault("name", self.name)
            self.__dict__["_metadata"] = made
        return made


@dataclass
class CompileInfo:
    """One compile, as the listener sees it."""

    name: str
    compiled: Any                    # the CompiledKernel
    stage_times_s: dict[str, float]
    cache_hit: bool


class _RuntimeKnobs:
    """``knobs.runtime``: the launch hooks."""

    def __init__(self) -> None:
        self._enter: Optional[Callable[[LaunchInfo], Any]] = None
        self._exit: Optional[Callable[[LaunchInfo], Any]] = None

    @property
    def launch_enter_hook(self) -> Optional[Callable[[LaunchInfo], Any]]:
        return self._enter

    @launch_enter_hook.setter
    def launch_enter_hook(self, hook: Optional[Callable[[LaunchInfo], Any]]) -> None:
        self._enter = hook
        _hooks_changed()

    @property
    def launch_exit_hook(self) -> Optional[Callable[[LaunchInfo], Any]]:
        return self._exit

    @launch_exit_hook.setter
    def launch_exit_hook(self, hook: Optional[Callable[[LaunchInfo], Any]]) -> None:
        self._exit = hook
        _hooks_changed()


class _CompilationKnobs:
    """``knobs.compilation``: the compile listener."""

    def __init__(self) -> None:
        self.listener: Optional[Callable[[CompileInfo], Any]] = None


class _Knobs:
    """``anytile.knobs``: ``runtime`` (launch hooks) and ``compilation`` (the listener)."""

    def __init__(self) -> None:
        self.runtime = _RuntimeKnobs()
        self.compilation = _CompilationKnobs()


knobs = _Knobs()


def launch_hooks_set() -> bool:
    """Whether a launch hook is set (the fast path then stays empty)."""
    return knobs.runtime._enter is not None or knobs.runtime._exit is not None


_on_change: list[Callable[[], Any]] = []


def on_launch_hooks_change(callback: Callable[[], Any]) -> None:
    """Call ``callback()`` whenever a launch hook is set or unset (the launch path drops its
    fast entries, so that launches take the general path, which calls the hooks)."""
    _on_change.append(callback)


def _hooks_changed() -> None:
    for callback in list(_on_change):
        callback()


def call_launch_hook(which: str, info: LaunchInfo) -> None:
    hook = knobs.runtime._enter if which == "enter" else knobs.runtime._exit
    if hook is not None:
        hook(info)


def call_compile_listener(name: str, compiled: Any, cache_hit: bool) -> None:
    listener = knobs.compilation.listener
    if listener is not None:
        listener(CompileInfo(name, compiled, dict(compiled.metadata.stage_times_s), cache_hit))


_allocator: Any = None


def set_allocator(allocator: Any) -> None:
    """Triton's ``set_allocator(fn)``: ``fn(size, alignment, stream)`` returns device memory
    for kernels that need global scratch (Triton's TMA descriptors made in a kernel).  No
    anytile backend needs such scratch yet (tensor descriptors made in a kernel are plain
    block loads and stores), so the function is kept, checked to be callable, and not
    called."""
    global _allocator
    if allocator is not None and not callable(allocator):
        raise TypeError(f"set_allocator takes a function (size, alignment, stream) -> memory, "
                        f"got {allocator!r}")
    _allocator = allocator


def get_allocator() -> Any:
    """The function given to ``set_allocator`` (``None`` when none was)."""
    return _allocator
