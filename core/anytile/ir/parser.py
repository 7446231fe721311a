"""Reads the text form written by ``anytile.ir.printer`` back into a ``Module``.

``parse_module(text)`` is the inverse of ``print_module``: ``print_module(parse_module(t))``
equals ``t`` for any printer output ``t`` (with or without ``locs=True``).  Like the printer
it is generic over ops: it finds each op's class by name in ``OP_REGISTRY`` (core's ops, and
those of the loaded dialects: ``anytile.ir.dialects``) and fills the
fields named by ``OPERANDS``, ``ATTRS`` and ``REGIONS``.  Hand-written IR may contain
``// comments`` and ``# comments``.  Malformed text raises ``IRParseError`` with the line.
Laid-out IR parses too: layouts and dialect types are read by the syntaxes their code
generator registered (``anytile.ir.types.register_layout_syntax``, ``register_type_syntax``).
"""
from __future__ import annotations

import dataclasses

import json
import re
from dataclasses import dataclass
from typing import Any, Optional

from .dialects import dialect_of_name
from .nodes import OP_REGISTRY, UNKNOWN_LOC, Block, Function, Loc, Module, Op, Value
from .types import Type, parse_type

__all__ = ["IRParseError", "parse_module", "parse_function"]


class IRParseError(ValueError):
    """The IR text is malformed; ``line`` is the 1-based line of the problem."""

    def __init__(self, message: str, line: int) -> None:
        self.line = line
        self.problem = message
        super().__init__(f"line {line}: {message}")


# ---------------------------------------------------------------------------------------------
# Lexer
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Token:
    kind: str   # value symbol ident number string punct eof
    text: str
    line: int


_TOKEN_RE = re.compile(r"""
    (?P<skip>[ \t\r\n]+|(?://|\#)[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<value>%[A-Za-z0-9_.]+)
  | (?P<symbol>@(?:[A-Za-z0-9_.$]+|"(?:[^"\\\n]|\\.)*"))
  | (?P<number>-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>->|[(){}\[\],:=^!-])
  | (?P<bad>.)
""", re.VERBOSE | re.DOTALL)


def _angles_end(text: str, start: int, line: int) -> int:
    """The index after the ``>`` closing the ``<`` at ``start`` (types nest them, and layouts
    inside types nest them deeper: ``tile<8xf32, #slice<dim=0, parent=#blocked<...>>>``)."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == "\n":
            break
    raise IRParseError("unbalanced '<' in a type", line)


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    line = 1
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        kind, end = m.lastgroup, m.end()
        if kind == "skip":
            line += m.group().count("\n")
            pos = end
            continue
        if kind == "bad":
            c = m.group()
            if c in "<>":
                raise IRParseError(f"unbalanced '{c}' in a type", line)
            raise IRParseError(f"unexpected character {c!r}", line)
        if kind == "ident" and text.startswith("<", end):
            end = _angles_end(text, end, line)
        tokens.append(_Token(kind, text[pos:end], line))
        pos = end
    tokens.append(_Token("eof", "", line))
    return tokens


# ---------------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0
        self.scopes: list[dict[str, Value]] = []

    # -- token helpers ------------------------------------------------------------------------
    @property
    def tok(self) -> _Token:
        return self.tokens[self.pos]

    def peek(self, k: int = 1) -> _Token:
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def error(self, message: str, tok: Optional[_Token] = None) -> IRParseError:
        return IRParseError(message, (tok or self.tok).line)

    def at(self, text: str) -> bool:
        return self.tok.kind in ("punct", "ident") and self.tok.text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str = "") -> _Token:
        if not self.at(text):
            found = self.tok.text or "end of input"
            raise self.error(f"expected '{text}'{' ' + what if what else ''}, found '{found}'")
        tok = self.tok
        self.pos += 1
        return tok

    def expect_kind(self, kind: str, what: str) -> _Token:
        if self.tok.kind != kind:
            raise self.error(f"expected {what}, found '{self.tok.text or 'end of input'}'")
        tok = self.tok
        self.pos += 1
        return tok

    # -- values and scopes -------------------------------------------------------------------
    def lookup(self, tok: _Token) -> Value:
        name = tok.text[1:]
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.error(f"use of undefined value {tok.text}", tok)

    def define(self, tok: _Token, value: Value) -> None:
        name = tok.text[1:]
        if any(name in scope for scope in self.scopes):
            raise self.error(f"value {tok.text} is defined twice", tok)
        self.scopes[-1][name] = value
        value.name = "" if name.isdigit() else name  # numbers are the printer's, not hints

    # -- types, attributes, locations ---------------------------------------------------------
    def parse_type(self) -> Type:
        tok = self.expect_kind("ident", "a type")
        try:
            return parse_type(tok.text)
        except (ValueError, KeyError) as e:
            raise self.error(f"bad type '{tok.text}': {e}", tok) from None

    def parse_attr_dict(self) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        while not self.at("}"):
            if out:
                self.expect(",", "between attributes")
            key_tok = self.tok
            if key_tok.kind == "ident":
                key = key_tok.text
            elif key_tok.kind == "string":
                key = json.loads(key_tok.text)
            else:
                raise self.error(f"expected an attribute name, found '{key_tok.text}'")
            self.pos += 1
            if key in out:
                raise self.error(f"attribute '{key}' given twice", key_tok)
            self.expect("=", f"after attribute '{key}'")
            out[key] = self.parse_attr_value()
        self.expect("}")
        return out

    def parse_attr_value(self) -> Any:
        tok = self.tok
        if tok.kind == "number":
            self.pos += 1
            is_float = any(c in tok.text for c in ".eE")
            return float(tok.text) if is_float else int(tok.text)
        if tok.kind == "string":
            self.pos += 1
            return json.loads(tok.text)
        if self.accept("-"):
            word = self.expect_kind("ident", "inf or nan after '-'").text
            if word not in ("inf", "nan"):
                raise self.error(f"expected inf or nan after '-', found '{word}'")
            return -float(word)
        if tok.kind == "ident" and tok.text in _WORDS:
            self.pos += 1
            return _WORDS[tok.text]
        if self.accept("!"):
            return self.parse_type()
        if self.at("{"):
            return self.parse_attr_dict()
        if self.accept("["):
            items = self.parse_attr_items("]")
            return items
        if self.accept("("):
            items = self.parse_attr_items(")", tuple_syntax=True)
            return tuple(items)
        raise self.error(f"expected an attribute value, found '{tok.text or 'end of input'}'")

    def parse_attr_items(self, close: str, tuple_syntax: bool = False) -> list[Any]:
        items: list[Any] = []
        while not self.accept(close):
            items.append(self.parse_attr_value())
            if not self.accept(","):
                if tuple_syntax and len(items) == 1:
                    raise self.error("a one-element tuple is written '(x,)'")
                self.expect(close)
                break
        return items

    def parse_loc(self) -> Loc:
        self.expect("loc")
        self.expect("(")
        file = json.loads(self.expect_kind("string", "a file name").text)
        self.expect(":")
        line = int(self.expect_kind("number", "a line number").text)
        self.expect(":")
        col = int(self.expect_kind("number", "a column number").text)
        func = ""
        if self.accept("in"):
            func = json.loads(self.expect_kind("string", "a function name").text)
        self.expect(")")
        return Loc(file, line, col, func)

    # -- ops and blocks ----------------------------------------------------------------------
    def parse_operand_group(self, field_name: str, is_list: bool) -> Any:
        if self.accept("none"):
            return None
        if self.accept("["):
            values = []
            while not self.accept("]"):
                if values:
                    self.expect(",", f"between the values of '{field_name}'")
                values.append(self.lookup(self.expect_kind("value", "a %value")))
            return values
        if is_list:
            raise self.error(f"operand '{field_name}' is a list: write [%a, %b]")
        return self.lookup(self.expect_kind("value", f"a %value for operand '{field_name}'"))

    def parse_op(self) -> Op:
        result_toks: list[_Token] = []
        if self.tok.kind == "value":
            result_toks.append(self.expect_kind("value", "a result name"))
            while self.accept(","):
                result_toks.append(self.expect_kind("value", "a result name"))
            self.expect("=", "after the result names")
        name_tok = self.expect_kind("ident", "an op name")
        cls = OP_REGISTRY.get(name_tok.text)
        if cls is None:
            dialect = dialect_of_name(name_tok.text)
            raise self.error(f"unknown op '{name_tok.text}'" + (
                f" (an op of the '{dialect}' dialect, which is not loaded: its backend loads "
                f"it)" if dialect else ""), name_tok)
        kwargs: dict[str, Any] = {}
        if self.at("{") and self.peek(2).text == "=":
            for key, value in self.parse_attr_dict().items():
                if key not in cls.ATTRS:
                    raise self.error(f"op '{cls.NAME}' has no attribute '{key}' "
                                     f"(it has: {', '.join(cls.ATTRS) or 'none'})", name_tok)
                kwargs[key] = value
        if cls.OPERANDS:
            self.expect("(", f"before the operands of '{cls.NAME}'")
            fields = cls.__dataclass_fields__
            for i, field_name in enumerate(cls.OPERANDS):
                is_list = str(fields[field_name].type).startswith("list")
                if i and self.at(")") and all(
                        fields[f].default_factory is not dataclasses.MISSING
                        for f in cls.OPERANDS[i:]):
                    break    # trailing empty lists with a default are left out
                if i:
                    self.expect(",", f"'{cls.NAME}' takes {len(cls.OPERANDS)} operand groups "
                                     f"({', '.join(cls.OPERANDS)})")
                kwargs[field_name] = self.parse_operand_group(field_name, is_list)
            self.expect(")", f"after the {len(cls.OPERANDS)} operand groups of '{cls.NAME}'")
        types: list[Type] = []
        if self.accept(":"):
            types.append(self.parse_type())
            while self.accept(","):
                types.append(self.parse_type())
        if len(types) != len(result_toks):
            raise self.error(f"'{cls.NAME}' has {len(result_toks)} result names but "
                             f"{len(types)} result types", name_tok)
        loc = self.parse_loc() if self.at("loc") else UNKNOWN_LOC
        for i, region_name in enumerate(cls.REGIONS):
            if i:
                self.expect(region_name, f"(region {i + 1} of '{cls.NAME}')")
            self.expect("{", f"to open region '{region_name}' of '{cls.NAME}'")
            kwargs[region_name] = self.parse_block_body()
            self.expect("}", f"to close region '{region_name}'")
        try:
            op = cls(**kwargs, result_types=types, loc=loc)
        except (TypeError, ValueError) as e:
            raise self.error(f"cannot build '{cls.NAME}': {e}", name_tok) from None
        for tok, res in zip(result_toks, op.results):
            self.define(tok, res)
        return op

    def parse_block_body(self) -> Block:
        """Optional ``^(%a: T, ...):`` header, then ops up to the closing ``}``."""
        self.scopes.append({})
        block = Block()
        if self.accept("^"):
            self.expect("(", "after '^'")
            arg_toks, types = self.parse_typed_args(")")
            self.expect(":", "after the block arguments")
            block = Block.with_args(types)
            for tok, arg in zip(arg_toks, block.args):
                self.define(tok, arg)
        while not self.at("}"):
            if self.tok.kind == "eof":
                raise self.error("missing '}' at end of input")
            block.ops.append(self.parse_op())
        self.scopes.pop()
        return block

    def parse_typed_args(self, close: str,
                         with_attrs: bool = False) -> tuple[list[_Token], list[Any]]:
        toks: list[_Token] = []
        types: list[Any] = []
        while not self.accept(close):
            if toks:
                self.expect(",", "between arguments")
            toks.append(self.expect_kind("value", "an argument name (%name)"))
            self.expect(":", f"after {toks[-1].text}")
            t = self.parse_type()
            if with_attrs:
                t = (t, self.parse_attr_dict() if self.at("{") else {})
            types.append(t)
        return toks, types

    # -- functions and modules ----------------------------------------------------------------
    def parse_function(self) -> Function:
        kw = self.tok
        if not (self.at("kernel") or self.at("func")):
            raise self.error(f"expected 'kernel' or 'func', found '{kw.text or 'end of input'}'")
        self.pos += 1
        symbol = self.expect_kind("symbol", "a function name (@name)").text[1:]
        name = json.loads(symbol) if symbol.startswith('"') else symbol
        self.expect("(", "before the parameters")
        arg_toks, typed = self.parse_typed_args(")", with_attrs=True)
        result_types: list[Type] = []
        if self.accept("->"):
            if self.accept("("):
                while not self.accept(")"):
                    if result_types:
                        self.expect(",", "between result types")
                    result_types.append(self.parse_type())
            else:
                result_types.append(self.parse_type())
        loc = self.parse_loc() if self.at("loc") else UNKNOWN_LOC
        self.expect("{", "to open the function body")
        body = Block.with_args([t for t, _ in typed])
        self.scopes = [{}]
        for tok, arg in zip(arg_toks, body.args):
            self.define(tok, arg)
        inner = self.parse_block_body()
        body.ops = inner.ops
        self.expect("}", "to close the function body")
        arg_attrs = [a for _, a in typed]
        if not any(arg_attrs):
            arg_attrs = [{} for _ in typed]
        return Function(name, body, result_types=result_types, arg_attrs=arg_attrs, loc=loc,
                        is_kernel=kw.text == "kernel")

    def parse_module(self) -> Module:
        module = Module()
        if self.accept("module"):
            self.expect("attributes", "after 'module'")
            module.attrs = self.parse_attr_dict()
        while self.tok.kind != "eof":
            start = self.tok
            fn = self.parse_function()
            if fn.name in module.functions:
                raise self.error(f"function @{fn.name} is defined twice", start)
            module.add(fn)
        return module


_WORDS = {"True": True, "False": False, "None": None, "inf": float("inf"),
          "nan": float("nan")}


def parse_module(text: str) -> Module:
    """Parse a module printed by ``print_module``; raises ``IRParseError`` with a line number."""
    return _Parser(text).parse_module()


def parse_function(text: str) -> Function:
    """Parse one function (``kernel @k(...) {...}`` or ``func @f(...) {...}``)."""
    parser = _Parser(text)
    fn = parser.parse_function()
    if parser.tok.kind != "eof":
        raise parser.error(f"unexpected '{parser.tok.text}' after the function")
    return fn
