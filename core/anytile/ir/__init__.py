"""anytile's typed tile IR: types, ops, builder, printer, parser and verifier.

``__all__`` is the IR's public surface, what backends and passes are meant to use: the
types (``types.__all__``), the IR's skeleton and its use lists, its ops and their kinds, the
op set versions, dialects, the builder, the text form and the verifier.  The modules
``types``, ``kinds``, ``ops`` (and its parts), ``rules`` (the checks an op's ``verify``
uses), ``dialects``, ``opsets`` and ``uses`` are public too; the other names this package
happens to hold (``OP_REGISTRY``, the kinds as tuples of strings, ``PURE``...) are core's own.
"""
from . import types
from .types import *  # noqa: F401,F403
from .kinds import *  # noqa: F401,F403
from .nodes import (Block, Function, Loc, Module, Op, OP_REGISTRY, UNKNOWN_LOC, Value,  # noqa: F401
                    clone_block, walk)
from .ops import *  # noqa: F401,F403
from .uses import Uses
from .dce import dce_function
from .opsets import (DROPPABLE_OPS, LATEST_OP_SET, OP_SETS, OpSet, drop_ops, first_op_outside,
                     ops_of_version)
from .builder import Builder
from .dialects import Dialect
from .printer import print_function, print_module
from .parser import IRParseError, parse_module
from .verifier import (IRVerificationError, verification_enabled, verify_function,
                       verify_if_enabled, verify_module)

_SKELETON = ["Loc", "UNKNOWN_LOC", "Value", "Block", "Op", "Function", "Module", "walk",
             "clone_block", "Uses"]
_KINDS = ["Trait", "BinaryKind", "UnaryKind", "ComparePredicate", "AtomicKind",
          "MemorySemantics", "MemoryScope", "InputPrecision", "IREnum"]
_OPS = ["ConstantOp", "ProgramIdOp", "NumProgramsOp", "ArangeOp", "SplatOp", "BroadcastOp",
        "ExpandDimsOp", "ReshapeOp", "PermuteOp",
        "BinaryOp", "CompareOp", "UnaryOp", "FmaOp", "UMulHiOp", "SelectOp", "CastOp",
        "BitcastOp", "HintOp",
        "AddPtrOp", "LoadOp", "StoreOp", "AtomicRMWOp", "AtomicCASOp",
        "ReduceOp", "ScanOp", "DotOp",
        "YieldOp", "ConditionOp", "ReturnOp", "ForOp", "IfOp", "WhileOp", "CallOp", "AssertOp",
        "AssumeOp", "BarrierOp", "PrintOp"]
_VERSIONS = ["OpSet", "OP_SETS", "LATEST_OP_SET", "DROPPABLE_OPS", "ops_of_version", "drop_ops",
             "first_op_outside", "Dialect"]
_TOOLS = ["dce_function", "Builder", "print_module", "print_function", "parse_module", "IRParseError",
          "verify_module", "verify_function", "verify_if_enabled", "verification_enabled",
          "IRVerificationError"]

__all__ = [*types.__all__, *_SKELETON, *_KINDS, *_OPS, *_VERSIONS, *_TOOLS]
