"""Atomics that LLVM's ``atomicrmw`` cannot express, as compare-and-swap loops.

A float atomic whose operation is the IR's own (``bf16``, which has no LLVM type to give
``atomicrmw``; float max and min, which order -0 below +0 where LLVM's ``fmax``/``fmin`` may
keep either) reads the element's bit pattern, applies the elementwise op and swaps the new
pattern in, again until no other thread wrote between the read and the swap.  The loop is
the same on every target; how one compare-and-swap is issued (ordering, synchronisation
scope, target metadata) is the caller's ``swap``.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from ...ir.types import ScalarType
from .elementwise import ElementwiseLowering
from .types import LLVMTypes

__all__ = ["Swap", "cas_loop"]

#: ``swap(ptr, old, new) -> (seen, swapped)``: one compare-and-swap of the bit patterns
#: ``old`` -> ``new`` at ``ptr``; ``seen`` is what memory held, ``swapped`` an ``i1``
Swap = Callable[[ir.Value, ir.Value, ir.Value], "tuple[ir.Value, ir.Value]"]


def cas_loop(ew: ElementwiseLowering, types: LLVMTypes, kind: str, elem: ScalarType,
             ptr: ir.Value, value: ir.Value, swap: Swap) -> ir.Value:
    """``*ptr = kind(*ptr, value)`` (``"xchg"``: ``*ptr = value``) for one element of
    ``elem``, by a loop of ``swap`` on its bit pattern; ``value`` and the result (the old
    value) are in compute form.  A 16-bit swap stays 16-bit: LLVM widens it to the 32-bit
    word where the target has none."""
    b = ew.b
    bits, storage = ir.IntType(elem.bits), types.storage(elem)
    if not getattr(ptr.type, "is_opaque", True) and ptr.type.pointee != bits:
        ptr = b.bitcast(ptr, bits.as_pointer(ptr.type.addrspace))
    start = b.load(ptr, typ=bits, align=elem.nbytes)
    before = b.block
    loop = b.append_basic_block("cas")
    done = b.append_basic_block("cas.end")
    b.branch(loop)
    b.position_at_end(loop)
    old = b.phi(bits)
    old.add_incoming(start, before)
    current = ew.from_storage(elem, old if storage == bits else b.bitcast(old, storage))
    new = value if kind == "xchg" else ew.binary(kind, elem, current, value)
    new_raw = ew.to_storage(elem, new)
    seen, swapped = swap(ptr, old, new_raw if storage == bits else b.bitcast(new_raw, bits))
    old.add_incoming(seen, b.block)
    b.cbranch(swapped, done, loop)
    b.position_at_end(done)
    return current
