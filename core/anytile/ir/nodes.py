"""The skeleton of the tile IR: source locations, SSA values, blocks, ops, functions, modules.

The IR is SSA with structured control flow.  A ``Function`` owns one ``Block``; a block is an
ordered list of ops and has block arguments; ops with regions (``for``, ``if``, ``while``,
``reduce``, ``scan``) own blocks of their own.  There are no branches and no CFG.

Each op is a small dataclass declared in ``anytile.ir.ops``.  Its class says, as data, which
fields are operands (``OPERANDS``: a ``Value``, an optional ``Value`` or a list of values),
which are attributes (``ATTRS``: plain Python values, or members of the enumerations of
``anytile.ir.kinds`` named by ``ENUM_ATTRS``), which are regions (``REGIONS``: a ``Block``
each) and what kind of op it is (``TRAITS``), so the printer, parser, verifier and generic
passes need no per-op code.  The op's own rules live on its class too (``verify``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Optional, Sequence

from .kinds import IREnum, Trait
from .types import Type

__all__ = ["Loc", "UNKNOWN_LOC", "Value", "Block", "Op", "Function", "Module", "OP_REGISTRY",
           "walk", "Trait", "TRAIT_PURE", "TRAIT_COMMUTATIVE", "TRAIT_ELEMENTWISE",
           "TRAIT_TERMINATOR", "TRAIT_MEMORY", "TRAIT_SIDE_EFFECT", "TRAIT_CONTROL"]

# the traits under their older names (``Trait`` documents each)
TRAIT_PURE = Trait.PURE
TRAIT_COMMUTATIVE = Trait.COMMUTATIVE
TRAIT_ELEMENTWISE = Trait.ELEMENTWISE
TRAIT_TERMINATOR = Trait.TERMINATOR
TRAIT_MEMORY = Trait.MEMORY
TRAIT_SIDE_EFFECT = Trait.SIDE_EFFECT
TRAIT_CONTROL = Trait.CONTROL


@dataclass(frozen=True)
class Loc:
    """A place in the user's source: file, 1-based line, 0-based column, function name."""

    file: str = "<unknown>"
    line: int = 0
    col: int = 0
    func: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN_LOC = Loc()


class Value:
    """An SSA value: the result of an op or an argument of a block."""

    __slots__ = ("type", "owner", "index", "name")

    def __init__(self, type: Type, owner: Any = None, index: int = 0, name: str = "") -> None:
        self.type = type
        self.owner = owner      # the defining Op, or the Block whose argument this is
        self.index = index
        self.name = name        # a hint for the printer (user's variable name)

    def __repr__(self) -> str:
        return f"<Value {self.name or id(self)}: {self.type}>"


@dataclass(eq=False)
class Block:
    """An ordered list of ops with typed block arguments."""

    args: list[Value] = field(default_factory=list)
    ops: list["Op"] = field(default_factory=list)

    @staticmethod
    def with_args(types: Sequence[Type], names: Sequence[str] = ()) -> "Block":
        block = Block()
        names = list(names) + [""] * (len(types) - len(names))
        block.args = [Value(t, block, i, n) for i, (t, n) in enumerate(zip(types, names))]
        return block

    @property
    def terminator(self) -> Optional["Op"]:
        if self.ops and TRAIT_TERMINATOR in self.ops[-1].TRAITS:
            return self.ops[-1]
        return None


OP_REGISTRY: dict[str, type["Op"]] = {}


@dataclass(eq=False)
class Op:
    """Base class of all ops.

    Subclasses are dataclasses whose fields come in the order operands, attributes, regions,
    and which set ``NAME``, ``OPERANDS``, ``ATTRS``, ``REGIONS`` and ``TRAITS``.  Result types
    are given with ``result_types=`` or, when omitted, computed by ``infer_types``.

    ``ENUM_ATTRS`` maps attributes to their enumeration (``{"kind": BinaryKind}``): a plain
    string given for one becomes the member, an unknown one raises ``ValueError``.

    The verifier (``anytile.ir.verifier``) checks what every op shares (SSA scoping,
    terminators, operand fields, enum attributes, result types equal to ``infer_types()``
    unless ``EXPLICIT_RESULTS``) and then calls the op's own ``verify()`` (and
    ``verify_in_module(module)`` for rules that need other functions, as calls do).
    """

    NAME: ClassVar[str] = ""
    OPERANDS: ClassVar[tuple[str, ...]] = ()
    ATTRS: ClassVar[tuple[str, ...]] = ()
    REGIONS: ClassVar[tuple[str, ...]] = ()
    TRAITS: ClassVar[frozenset[Trait]] = frozenset()
    ENUM_ATTRS: ClassVar[dict[str, type[IREnum]]] = {}
    #: result types are given, never inferred (``infer_types`` is only a builder's default)
    EXPLICIT_RESULTS: ClassVar[bool] = False
    #: the dialect of a backend's op (``anytile.ir.dialects``; "" for core's ops)
    DIALECT: ClassVar[str] = ""

    result_types: Optional[Sequence[Type]] = field(default=None, kw_only=True, repr=False)
    loc: Loc = field(default=UNKNOWN_LOC, kw_only=True, repr=False)

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        name = cls.__dict__.get("NAME", "")
        # a dialect's ops (``dialect.op``) are known once their dialect is loaded
        if name and "." not in name:
            OP_REGISTRY[name] = cls

    def __post_init__(self) -> None:
        for name, kinds in self.ENUM_ATTRS.items():
            setattr(self, name, kinds.parse(getattr(self, name)))
        types = list(self.result_types) if self.result_types is not None else self.infer_types()
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(types)]
        self.result_types = None  # the results are the single source of truth from now on

    # -- to be overridden --------------------------------------------------------------------
    def infer_types(self) -> list[Type]:
        """Result types computed from operands and attributes (ops that can, override this)."""
        if self.OPERANDS and not self.TRAITS & {TRAIT_TERMINATOR, TRAIT_SIDE_EFFECT}:
            raise TypeError(f"op '{self.NAME}' needs explicit result_types")
        return []

    def verify(self) -> None:
        """Check this op's own rules: its operand, attribute and region types, following its
        docstring.  Raise ``anytile.ir.rules.VerifyError`` with a plain message ("operand
        types differ: i32 vs f32"); the verifier adds the function, the op's location and its
        text.  Runs after the structural checks, so operands are values in scope and regions
        are verified.  Ops with rules override this (xDSL's ``verify_``)."""

    def verify_in_module(self, module: "Module") -> None:
        """Rules that need the rest of the module (a call's callee); like ``verify``.  Only
        run when a whole module is verified."""

    # -- generic access ----------------------------------------------------------------------
    @property
    def result(self) -> Value:
        """The single result of a one-result op."""
        assert len(self.results) == 1, f"op '{self.NAME}' has {len(self.results)} results"
        return self.results[0]

    @property
    def operands(self) -> list[Value]:
        """All operand values, flattened in declaration order (absent optionals skipped)."""
        out: list[Value] = []
        for name in self.OPERANDS:
            v = getattr(self, name)
            if isinstance(v, list):
                out.extend(v)
            elif v is not None:
                out.append(v)
        return out

    def map_operands(self, fn: Any) -> None:
        """Replace every operand ``v`` with ``fn(v)`` (in place, nested regions untouched)."""
        for name in self.OPERANDS:
            v = getattr(self, name)
            if isinstance(v, list):
                setattr(self, name, [fn(x) for x in v])
            elif v is not None:
                setattr(self, name, fn(v))

    @property
    def attrs(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.ATTRS}

    @property
    def regions(self) -> list[Block]:
        return [getattr(self, name) for name in self.REGIONS]

    def has_trait(self, trait: Trait) -> bool:
        return trait in self.TRAITS

    def clone_with(self, mapping: dict[Value, Value]) -> "Op":
        """A deep copy whose operands go through ``mapping`` (values not in it are kept),
        regions included; new results and block args are added to ``mapping``."""
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("result_types", "loc"):
                continue
            v = getattr(self, f.name)
            if f.name in self.OPERANDS:
                v = [mapping.get(x, x) for x in v] if isinstance(v, list) else (
                    None if v is None else mapping.get(v, v))
            elif f.name in self.REGIONS:
                v = clone_block(v, mapping)
            kwargs[f.name] = v
        new = type(self)(**kwargs, result_types=[r.type for r in self.results], loc=self.loc)
        for old_r, new_r in zip(self.results, new.results):
            new_r.name = old_r.name
            mapping[old_r] = new_r
        return new


def clone_block(block: Block, mapping: dict[Value, Value]) -> Block:
    new = Block.with_args([a.type for a in block.args], [a.name for a in block.args])
    for old_a, new_a in zip(block.args, new.args):
        mapping[old_a] = new_a
    new.ops = [op.clone_with(mapping) for op in block.ops]
    return new


def walk(block: Block) -> Iterator[Op]:
    """Every op in ``block`` and its nested regions, parents before children."""
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from walk(region)


@dataclass(eq=False)
class Function:
    """A kernel or a jit function called by one.

    ``body.args`` are the parameters; ``arg_attrs[i]`` holds specialisation facts about
    parameter ``i`` (``{"divisibility": 16}`` when the launcher saw an integer or address
    divisible by 16).  A kernel returns nothing; a called function ends with ``return``."""

    name: str
    body: Block
    result_types: list[Type] = field(default_factory=list)
    arg_attrs: list[dict[str, Any]] = field(default_factory=list)
    loc: Loc = UNKNOWN_LOC
    is_kernel: bool = False

    @property
    def args(self) -> list[Value]:
        return self.body.args

    def walk(self) -> Iterator[Op]:
        return walk(self.body)


@dataclass(eq=False)
class Module:
    """A compilation unit: the kernel and every jit function it calls, by name."""

    functions: dict[str, Function] = field(default_factory=dict)
    kernel_name: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def kernel(self) -> Function:
        return self.functions[self.kernel_name]

    def add(self, fn: Function) -> Function:
        self.functions[fn.name] = fn
        if fn.is_kernel:
            self.kernel_name = fn.name
        return fn

    def __str__(self) -> str:
        from .printer import print_module
        return print_module(self)
