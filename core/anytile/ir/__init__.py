"""anytile's typed tile IR: types, ops, builder, printer, parser and verifier."""
from .types import *  # noqa: F401,F403
from .core import (Block, Function, Loc, Module, Op, OP_REGISTRY, UNKNOWN_LOC, Value,  # noqa: F401
                   walk)
from .ops import *  # noqa: F401,F403
from .builder import Builder  # noqa: F401
