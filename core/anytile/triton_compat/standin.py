"""The stand-in modules the import hook serves for ``triton.*``: each holds the names it was
given, and reading any other says that anytile does not provide it."""
from __future__ import annotations

import importlib
import types
from typing import Any, Callable

__all__ = ["TRITON_VERSION", "NOT_PROVIDED_HINT", "SERVED", "StandInModule", "once",
           "not_provided"]

TRITON_VERSION = "3.6.0"   # the Triton release whose API is served

NOT_PROVIDED_HINT = "anytile serves Triton's public API only; see anytile.triton_compat"


SERVED: set[str] = set()   # the module names the hook serves (filled by install)


class StandInModule(types.ModuleType):
    """A stand-in module: the attributes it was given; any other is not provided."""

    def __init__(self, name: str, attrs: dict[str, Any]) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # `from m import x` asks the finder for m.x: it says why not
        self.__dict__.update(attrs)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if f"{self.__name__}.{attr}" in SERVED:     # triton.testing without importing it
            return importlib.import_module(f"{self.__name__}.{attr}")
        raise AttributeError(f"{self.__name__}.{attr} is not provided by anytile "
                           f"({NOT_PROVIDED_HINT})")


StandInModule.__module__ = "anytile.triton_compat"   # what type(triton) says it comes from


def once(build: Callable[[], Any]) -> Callable[[], Any]:
    """``build``, called the first time only (one ``triton.knobs`` module for every import)."""
    made: list = []

    def get() -> Any:
        if not made:
            made.append(build())
        return made[0]
    return get


def not_provided(what: str) -> str:
    return f"{what} is not provided by anytile ({NOT_PROVIDED_HINT})"

