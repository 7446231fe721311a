"""The exceptions anytile raises to users.

Every error that is the user's doing names the kernel's file:line.  ``CompilationError`` is
raised by one choke point in the frontend; launch-time errors (out-of-bounds access, failed
``device_assert``) come from the backend that detected them, with the op's location.
``BOUNDS_PREFIX`` is for backends: it starts the message of the assertions checked mode adds
around memory accesses."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar

from .ir.nodes import Loc

__all__ = ["AnytileError", "CompilationError", "LaunchError", "LaunchArgumentError",
           "LaunchValueError", "LaunchOverflowError", "OutOfBoundsError",
           "DeviceAssertError", "BackendError", "format_source_excerpt", "device_assert_error",
           "describe_place", "describe_lane", "for_the_user", "user_facing", "BOUNDS_PREFIX"]

#: the exception chain Python prints (``raise ... from``), read and set past a subclass's
#: ``__cause__``
_CHAINED = BaseException.__dict__["__cause__"]


class AnytileError(Exception):
    """Base class of anytile's errors."""


def for_the_user(exc: AnytileError) -> AnytileError:
    """``exc`` as the user-facing entry points re-raise it, ``raise for_the_user(exc) from
    None``: without anytile's frames and with nothing chained, so Python prints the user's
    line and the message once.  A ``CompilationError`` keeps the broken rule the frontend
    chained to it as ``rule`` (read back as ``__cause__``)."""
    if isinstance(exc, CompilationError) and exc.__dict__.get("rule") is None:
        cause = _CHAINED.__get__(exc)
        if cause is not None and cause.__traceback__ is None:   # bare: no compiler frames
            exc.rule = cause
    return exc.with_traceback(None)


_Entry = TypeVar("_Entry", bound=Callable[..., Any])


def user_facing(entry: _Entry) -> _Entry:
    """Decorate a public entry point (``JITFunction.run``, ``at.compile``...): an
    ``AnytileError`` it raises reaches the user through ``for_the_user``, with one frame of
    anytile's between their call and the message.  (The generated launcher of
    ``kernel[grid](...)`` does the same in its own ``except``: a wrapper would cost each
    launch a call.)"""
    @functools.wraps(entry)
    def user_entry_point(*args: Any, **kwargs: Any) -> Any:
        try:
            return entry(*args, **kwargs)
        except AnytileError as exc:
            raise for_the_user(exc) from None
    return user_entry_point  # type: ignore[return-value]


def format_source_excerpt(loc: Optional[Loc], source_line: Optional[str]) -> str:
    """``file:line:col`` followed by the source line and a caret under the column."""
    if loc is None:
        return ""
    text = f"{loc.file}:{loc.line}:{loc.col + 1}"
    if loc.func:
        text += f" (in {loc.func})"
    if source_line:
        stripped = source_line.rstrip("\n")
        indent = len(stripped) - len(stripped.lstrip())
        col = max(loc.col, indent)
        text += "\n    " + stripped[indent:] + "\n    " + " " * (col - indent) + "^"
    return text


class CompilationError(AnytileError):
    """A kernel could not be compiled: the message names the kernel's file:line, shows the
    source line with a caret, and says what was expected and what was found."""

    def __init__(self, message: str, loc: Optional[Loc] = None,
                 source_line: Optional[str] = None) -> None:
        self.message = message
        self.loc = loc
        self.source_line = source_line
        self.rule: Optional[BaseException] = None
        excerpt = format_source_excerpt(loc, source_line)
        super().__init__(f"{excerpt}\n{message}" if excerpt else message)

    # Triton's tests read the broken rule (a bare ``TypeError``...) as ``err.__cause__``;
    # kept apart from the chain Python prints, the message is printed once, not twice
    @property  # type: ignore[override]
    def __cause__(self) -> Optional[BaseException]:
        chained = _CHAINED.__get__(self)
        return chained if chained is not None else self.__dict__.get("rule")

    @__cause__.setter
    def __cause__(self, value: Optional[BaseException]) -> None:
        _CHAINED.__set__(self, value)


class LaunchError(AnytileError):
    """A kernel failed while running, or could not be launched."""

    def __init__(self, message: str, loc: Optional[Loc] = None,
                 source_line: Optional[str] = None) -> None:
        self.message = message
        self.loc = loc
        excerpt = format_source_excerpt(loc, source_line)
        super().__init__(f"{excerpt}\n{message}" if excerpt else message)


class LaunchArgumentError(LaunchError, TypeError):
    """A launch was given an argument, grid or option of a kind the kernel cannot take (also a
    ``TypeError``); the message names it and says what was expected."""


class LaunchValueError(LaunchError, ValueError):
    """A launch was given an argument, grid or option whose value the kernel cannot take (also
    a ``ValueError``); the message names it and says what was expected."""


class LaunchOverflowError(LaunchValueError, OverflowError):
    """An integer argument that no 64-bit type holds (also an ``OverflowError``, as Triton
    raises)."""


class OutOfBoundsError(LaunchError):
    """An unmasked load, store or atomic touched memory outside every live allocation."""


def describe_place(addr: int, base: int, nbytes: int, elem_size: int,
                   adjective: str = "") -> str:
    """Where ``addr`` lies relative to the allocation of ``nbytes`` bytes at ``base``, as
    out-of-bounds reports say it: "element 10 of a 10-element (40-byte) allocation"
    (``adjective``: e.g. "freed ")."""
    offset = addr - base
    where = (f"element {offset // elem_size}" if offset % elem_size == 0
             else f"byte offset {offset}")
    return f"{where} of a {adjective}{nbytes // elem_size}-element ({nbytes}-byte) allocation"


def describe_lane(lane: tuple[int, ...], shape: tuple[int, ...], what: str = "pointer tile") -> str:
    """Lane ``lane`` (one index per dimension) of a tile of ``shape``, as launch errors say
    it: "lane (1,) of a 16-lane pointer tile"."""
    tile = f"{shape[0]}-lane" if len(shape) == 1 else "x".join(map(str, shape))
    return f"lane {lane} of a {tile} {what}"


class DeviceAssertError(LaunchError):
    """A ``tl.device_assert`` failed."""


#: how checked mode's bounds tests (``anytile.codegen.bounds_checks``) start the message of
#: the assertion they add: a backend reporting it as a failed ``device_assert`` raises
#: ``OutOfBoundsError`` instead
BOUNDS_PREFIX = "out-of-bounds: "
#: and their integer-division tests: a failure is a ``LaunchError``
DIVISION_PREFIX = "checked division: "


def device_assert_error(message: str, file: str, line: int) -> LaunchError:
    """The error a backend raises for a failed ``device_assert`` it recorded as ``(message,
    file, line)`` (a form that survives a compile cache), with the source line shown; a
    checked-mode bounds test's is an ``OutOfBoundsError``."""
    import linecache
    loc = Loc(file, int(line), 0)
    source = linecache.getline(file, int(line)) or None
    if message.startswith(BOUNDS_PREFIX):
        return OutOfBoundsError(f"out-of-bounds {message[len(BOUNDS_PREFIX):]} (checked mode: "
                                f"the access was not made)", loc, source)
    if message.startswith(DIVISION_PREFIX):
        return LaunchError(f"{message[len(DIVISION_PREFIX):]} (checked mode; the result of "
                           f"that lane is undefined)", loc, source)
    return DeviceAssertError(f"device assertion failed: {message}" if message else
                             "device assertion failed", loc, source)


class BackendError(AnytileError):
    """A backend is missing, broken, incompatible or cannot serve the request."""
