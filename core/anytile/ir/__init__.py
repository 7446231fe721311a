"""anytile's typed tile IR: types, ops, builder, printer, parser and verifier."""
from .types import *  # noqa: F401,F403
from .kinds import *  # noqa: F401,F403
from .nodes import (Block, Function, Loc, Module, Op, OP_REGISTRY, UNKNOWN_LOC, Value,  # noqa: F401
                   clone_block, walk)
from .ops import *  # noqa: F401,F403
from .builder import Builder  # noqa: F401
from .dialects import Dialect  # noqa: F401
from .printer import print_function, print_module  # noqa: F401,E402
from .parser import IRParseError, parse_module  # noqa: F401,E402
from .verifier import (IRVerificationError, verification_enabled, verify_function,  # noqa: F401,E402
                       verify_if_enabled, verify_module)
