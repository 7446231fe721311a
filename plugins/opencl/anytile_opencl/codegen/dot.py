"""``tl.dot``: ``acc + a @ b`` with every output chunk's products summed in the accumulator's
type (f32 for 16-bit floats, i32 for i8: products exact, sums with ``fma``).

``a`` and ``b`` are staged (``collective``) and each work-item computes its own chunks of the
result: for a chunk of ``lanes`` consecutive columns of one row, ``a[i, kk]`` times the vector
``b[kk, j..j+lanes]``, for every ``kk``.  When both operands do not fit the device's local
memory at once (a GPU's 48 KiB), ``K`` is cut into slices that do: each slice of ``a``'s columns
and ``b``'s rows is staged in turn and the partial sums stay in a private array.
"""
from __future__ import annotations

from typing import Any

from anytile.errors import CompilationError
from anytile.ir import DotOp, TileType, f32, f64, i32

from .chunk import Chunk, Point, ramp, uniform, vector
from .ctypes import size_of, vector_name

__all__ = ["DotEmitter"]


class DotEmitter:
    """The part of ``KernelEmitter`` that writes ``dot``."""

    def emit_dot(self, op: DotOp) -> None:
        a_t, b_t, out = op.a.type, op.b.type, op.result.type
        m, k = a_t.shape
        n = b_t.shape[1]
        compute = out.elem if out.elem.is_int or out.elem == f64 else f32
        slice_k = self._k_slice(op, m, n, k)
        if slice_k == k:
            (a_base, a_space), (b_base, b_space) = self.stage_all([op.a, op.b])
            operands = ((a_base, a_space, a_t.elem, k), (b_base, b_space, b_t.elem))

            def chunk_of(point: Point) -> Chunk:
                acc = self.arith.cast(self.chunk(op.acc, point), compute)
                return self.arith.cast(self._products(point, acc, compute, k, n, operands),
                                       out.elem)
            self.store_tile(op.result, chunk_of)
            return
        partial = self.declare_stored(TileType(out.shape, compute, out.layout), "acc")
        with self.chunk_loop(out.layout, out.shape) as point:
            acc = self.arith.cast(self.chunk(op.acc, point), compute)
            self.w.line(f"{partial.name}[{point.natural[1]}] = {acc.as_vector()};")
        with self.w.block(f"for (int k0 = 0; k0 < {k}; k0 += {slice_k})"):
            self.scratch_in_use = True                 # the previous slice's readers
            a_bytes = -(-m * slice_k * size_of(a_t.elem) // 16) * 16
            self.claim_scratch(a_bytes + slice_k * n * size_of(b_t.elem))
            a_base, b_base = self.scratch(0, a_t.elem), self.scratch(a_bytes, b_t.elem)
            self._stage_columns(op.a, a_base, slice_k)
            self._stage_rows(op.b, b_base, slice_k)
            self.local_barrier()
            operands = ((a_base, "__local", a_t.elem, slice_k), (b_base, "__local", b_t.elem))
            with self.chunk_loop(out.layout, out.shape) as point:
                acc = self.read_stored(partial, point)
                total = self._products(point, acc, compute, slice_k, n, operands)
                self.w.line(f"{partial.name}[{point.natural[1]}] = {total.as_vector()};")
        self.store_tile(op.result,
                        lambda p: self.arith.cast(self.read_stored(partial, p), out.elem))

    def _k_slice(self, op: DotOp, m: int, n: int, k: int) -> int:
        """The largest power-of-2 slice of ``K`` whose operands fit local memory at once."""
        if self.work_items == 1:
            return k
        sa, sb = size_of(op.a.type.elem), size_of(op.b.type.elem)
        budget = self.arch.local_bytes
        slice_k = k
        while slice_k >= 1:
            if -(-m * slice_k * sa // 16) * 16 + slice_k * n * sb <= budget:
                return slice_k
            slice_k //= 2
        raise CompilationError(f"tl.dot of {m}x{k} by {k}x{n}: even one column of a and row of "
                               f"b exceed the device's {budget} bytes of local memory", op.loc)

    def _stage_columns(self, value: Any, base: str, slice_k: int) -> None:
        """Columns ``k0 .. k0+slice_k`` of the ``M x K`` tile ``value`` to ``base`` (rows of
        ``slice_k``)."""
        t = value.type
        k = t.shape[1]
        with self.owners_only(t.layout):
            with self.chunk_loop(t.layout, t.shape) as point:
                c = self.chunk(value, point)
                lanes = c.lanes
                e = point.flat().expr
                column = self.arith.let(f"({e}) % {k} - k0", i32, 1, "kc")
                target = f"({e}) / {k} * {slice_k} + {column}"
                if slice_k % lanes == 0:           # a chunk lies in the slice or outside it
                    with self.w.block(f"if ({column} >= 0 && {column} < {slice_k})"):
                        self._write_flat(base, ramp(target, 1, i32, lanes, lanes) if lanes > 1
                                         else uniform(target, i32, 1), c)
                else:
                    lane = self.spill(c)
                    with self.w.block(f"for (int j = 0; j < {lanes}; j++)"):
                        with self.w.block(f"if ({column} + j >= 0 && {column} + j < {slice_k})"):
                            self.w.line(f"{base}[{target} + j] = {lane('j')};")

    def _stage_rows(self, value: Any, base: str, slice_k: int) -> None:
        """Rows ``k0 .. k0+slice_k`` of the ``K x N`` tile ``value`` to ``base``."""
        t = value.type
        n = t.shape[1]
        with self.owners_only(t.layout):
            with self.chunk_loop(t.layout, t.shape) as point:
                flat = point.flat()
                start = self.arith.let(f"({flat.expr}) - k0 * {n}", i32, 1, "kr")
                with self.w.block(f"if ({start} >= 0 && {start} < {slice_k * n})"):
                    index = ramp(start, 1, i32, flat.lanes, flat.lanes) if flat.lanes > 1 else \
                        uniform(start, i32, 1)
                    self._write_flat(base, index, self.chunk(value, point))

    def _products(self, point: Point, acc: Chunk, compute: Any, k: int, n: int,
                  operands: tuple) -> Chunk:
        """``acc`` plus the products of this chunk's row of ``a`` and columns of ``b``."""
        flat = point.flat()
        if n % point.lanes == 0:
            return self._dot_chunk(flat, acc, compute, k, n, *operands)
        lane = self.spill(acc) if not acc.is_uniform else None

        def one(f: Chunk) -> list:
            mine = uniform(self.arith.let(lane("lane"), compute, 1), compute, 1) if lane else \
                uniform(acc.expr, compute, 1)
            return [self._dot_chunk(f, mine, compute, k, n, *operands)]
        return self._lane_by_lane(flat, one, [compute])[0]

    def _dot_chunk(self, flat: Chunk, acc: Chunk, compute: Any, k: int, n: int,
                   a: tuple, b: tuple) -> Chunk:
        """``acc + a[i, :k] @ b[:k, j..j+lanes]`` for a chunk within one row of the output
        (``a`` is ``(pointer, space, elem, row stride)``, ``b`` ``(pointer, space, elem)``)."""
        lanes = flat.lanes
        row = self.arith.let(f"({flat.expr}) / {n}", i32, 1, "row")
        col = self.arith.let(f"({flat.expr}) % {n}", i32, 1, "col")
        total = self.w.fresh("dot")
        self.w.line(f"{vector_name(compute, lanes)} {total} = {acc.as_vector()};")
        with self.w.block(f"for (int kk = 0; kk < {k}; kk++)"):
            index_a = uniform(self.arith.let(f"{row} * {a[3]} + kk", i32, 1, "ia"), i32, lanes)
            index_b = ramp(self.arith.let(f"kk * {n} + {col}", i32, 1, "ib"), 1, i32, lanes, lanes)
            x = self.arith.cast(self.read_flat(a[0], a[2], index_a, a[1]), compute)
            y = self.arith.cast(self.read_flat(b[0], b[2], index_b, b[1]), compute)
            current = vector(total, compute, lanes) if lanes > 1 else uniform(total, compute, 1)
            if compute.is_int:
                merged = self.arith.binary("add", current, self.arith.binary("mul", x, y))
            else:
                merged = self.arith.fma(x, y, current)
            self.w.line(f"{total} = {merged.as_vector()};")
        return vector(total, compute, lanes) if lanes > 1 else uniform(total, compute, 1)
