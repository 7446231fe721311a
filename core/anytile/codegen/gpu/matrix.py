"""Matrix instructions as data: one ``MatrixInstr`` record per tensor-core instruction.

A backend describes each of its warp-wide (or wave-wide) matrix instructions by its shape
``m x n x k``, its input and accumulator types, the number of lanes that run it, and three
*fragment maps* saying which element of each tile a lane holds in each position:

* ``a_elem(lane, i) -> (row, k)``: the ``i``-th A element of ``lane`` (``i`` counts elements,
  not registers: register ``r`` packs elements ``r * a_pack .. r * a_pack + a_pack - 1``, the
  first in the lowest bits);
* ``b_elem(lane, i) -> (k, col)`` and ``acc_elem(lane, i) -> (row, col)`` alike.

Core derives everything else from the maps (``geometry``): the layout of a dot's result,
which accumulator register of the instruction is which register of that layout, and the
per-lane address arithmetic of a fragment in shared memory.  The maps must be *affine over
the lane's bits*: ``elem(lane, i) == elem(0, i) + part(lane)`` where ``part`` adds, for each set
bit of ``lane``, one fixed power of two to one coordinate (or nothing: a replicated operand),
and ``elem(0, i)`` never shares a bit with ``part(lane)``.  Every instruction family seen so
far (warp-wide m16n8kK, wave64 32x32 and 16x16 shapes with their accumulators in groups of
four rows, wave32 16x16x16 with operands replicated over the two lane halves) is of this
form.  ``check_instr`` verifies it, and that each element of each tile is held exactly
``replicas`` times.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Optional

__all__ = ["MatrixInstr", "LaneField", "FragmentMap", "MatrixGeometry", "geometry", "check_instr",
           "TYPE_BITS"]

#: bits of one element of a matrix-instruction operand type
TYPE_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "i8": 8, "u8": 8,
             "i32": 32}

ElemMap = Callable[[int, int], tuple[int, int]]


@dataclass(frozen=True)
class MatrixInstr:
    """One matrix instruction of a target (see the module docstring).

    ``a_type``/``b_type`` name the operands' element formats (IR scalar names, or ``"tf32"``:
    f32 operands rounded to 10 mantissa bits, used for ``input_precision="tf32"``);
    ``acc_type`` the accumulator's.  ``pad_bytes`` pads each row of A and of B by that many
    bytes in shared memory, so a warp's fragment reads spread over the banks."""

    name: str
    m: int
    n: int
    k: int
    a_type: str
    b_type: str
    acc_type: str
    lanes: int
    a_elem: ElemMap
    b_elem: ElemMap
    acc_elem: ElemMap
    a_pack: int = 1
    b_pack: int = 1
    a_replicas: int = 1
    b_replicas: int = 1
    pad_bytes: tuple[int, int] = (16, 16)

    @property
    def a_count(self) -> int:
        """A elements per lane."""
        return self.m * self.k * self.a_replicas // self.lanes

    @property
    def b_count(self) -> int:
        return self.k * self.n * self.b_replicas // self.lanes

    @property
    def acc_count(self) -> int:
        return self.m * self.n // self.lanes

    def accepts(self, a: str, b: str, acc: str, precision: str) -> bool:
        """Whether this instruction computes a ``dot`` of ``a`` x ``b`` tiles into ``acc`` (IR
        scalar names) at ``input_precision`` ``precision``."""
        if a != b or acc != self.acc_type or self.a_type != self.b_type:
            return False
        if self.a_type == "tf32":
            return a == "f32" and precision == "tf32"
        return a == self.a_type

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class LaneField:
    """``((lane >> shift) & (2**width - 1)) * unit``: one run of lane bits adding consecutive
    powers of two (times ``unit``) to one coordinate."""

    coord: int
    shift: int
    width: int
    unit: int


@dataclass(frozen=True)
class FragmentMap:
    """An element map split as ``elem(lane, i) = base[i] + lane part``: ``base`` per element,
    ``bits[b]`` = (coordinate, power of two) the lane's bit ``b`` adds, or ``None``."""

    base: tuple[tuple[int, int], ...]
    bits: tuple[Optional[tuple[int, int]], ...]

    def lane_part(self, lane: int) -> tuple[int, int]:
        out = [0, 0]
        for b, contrib in enumerate(self.bits):
            if contrib is not None and lane >> b & 1:
                out[contrib[0]] += contrib[1]
        return out[0], out[1]

    def fields(self, coord: int, scale: Callable[[int], int] = lambda v: v) -> list[LaneField]:
        """The lane fields of coordinate ``coord``, with each coordinate value ``v`` mapped
        to ``scale(v)`` (``scale`` must be additive over distinct bits): runs of consecutive
        lane bits whose scaled contributions are consecutive powers of two of one unit."""
        out: list[LaneField] = []
        for b, contrib in enumerate(self.bits):
            if contrib is None or contrib[0] != coord:
                continue
            value = scale(contrib[1])
            last = out[-1] if out else None
            if last is not None and last.shift + last.width == b and \
                    value == last.unit << last.width:
                out[-1] = LaneField(coord, last.shift, last.width + 1, last.unit)
            else:
                out.append(LaneField(coord, b, 1, value))
        return out


def _split(elem: ElemMap, count: int, lanes: int, what: str) -> FragmentMap:
    """``elem`` as a ``FragmentMap``; ``ValueError`` when it is not affine over lane bits."""
    base = tuple(tuple(elem(0, i)) for i in range(count))
    origin = base[0]
    bits: list[Optional[tuple[int, int]]] = []
    for b in range(lanes.bit_length() - 1):
        x, y = elem(1 << b, 0)
        delta = (x - origin[0], y - origin[1])
        if delta == (0, 0):
            bits.append(None)
        elif delta[1] == 0 and delta[0] > 0 and delta[0] & (delta[0] - 1) == 0:
            bits.append((0, delta[0]))
        elif delta[0] == 0 and delta[1] > 0 and delta[1] & (delta[1] - 1) == 0:
            bits.append((1, delta[1]))
        else:
            raise ValueError(f"{what}: lane bit {b} moves the element by {delta}, not by one "
                             f"power of two along one coordinate")
    split = FragmentMap(base, tuple(bits))
    for lane in range(lanes):
        part = split.lane_part(lane)
        for i in range(count):
            got = tuple(elem(lane, i))
            if got != (base[i][0] + part[0], base[i][1] + part[1]) or \
                    base[i][0] & part[0] or base[i][1] & part[1]:
                raise ValueError(f"{what}: element {i} of lane {lane} is {got}, not the element "
                                 f"of lane 0 {base[i]} plus the lane's part {part}")
    return split


def _check_cover(split: FragmentMap, count: int, lanes: int, shape: tuple[int, int],
                 replicas: int, what: str) -> None:
    held: dict[tuple[int, int], int] = {}
    for lane in range(lanes):
        part = split.lane_part(lane)
        for i in range(count):
            x, y = split.base[i][0] + part[0], split.base[i][1] + part[1]
            if not (0 <= x < shape[0] and 0 <= y < shape[1]):
                raise ValueError(f"{what}: lane {lane} element {i} = {(x, y)} is outside the "
                                 f"{shape[0]} x {shape[1]} tile")
            held[(x, y)] = held.get((x, y), 0) + 1
    wrong = [xy for xy in ((x, y) for x in range(shape[0]) for y in range(shape[1]))
             if held.get(xy, 0) != replicas]
    if wrong:
        raise ValueError(f"{what}: element {wrong[0]} is held {held.get(wrong[0], 0)} times, "
                         f"not {replicas}")


@dataclass(frozen=True)
class MatrixGeometry:
    """What core derives from an instruction's maps.

    The accumulator of one instruction is a ``BlockedLayout`` tile: ``spt[d]`` elements a
    thread along ``d``, ``tpw[d]`` lanes, lanes fastest along ``order[0]``, and ``reps[d]``
    repetitions of that block inside the instruction's tile.  ``acc_slots[i]`` =
    ``(p0, q0, p1, q1)``: accumulator element ``i`` is element ``p`` of repetition ``q``
    along each dimension."""

    a: FragmentMap
    b: FragmentMap
    acc: FragmentMap
    spt: tuple[int, int]
    tpw: tuple[int, int]
    reps: tuple[int, int]
    order: tuple[int, int]
    acc_slots: tuple[tuple[int, int, int, int], ...]

    def block(self, d: int) -> int:
        """Consecutive elements along ``d`` one warp's block covers (``spt * tpw``)."""
        return self.spt[d] * self.tpw[d]


def _log2(n: int) -> int:
    return n.bit_length() - 1


def _acc_geometry(instr: MatrixInstr, acc: FragmentMap) -> tuple:
    size = (instr.m, instr.n)
    if any(c is None for c in acc.bits):
        raise ValueError(f"{instr}: every lane must hold distinct accumulator elements")
    coords = [c for c, _ in acc.bits]
    order = list(dict.fromkeys(coords))       # the dimensions in the order lanes fill them
    if coords != sorted(coords, key=order.index):
        raise ValueError(f"{instr}: the lane bits of accumulator rows and columns interleave")
    order += [d for d in (1, 0) if d not in order]
    spt, tpw = [], []
    for d in (0, 1):
        positions = [_log2(v) for c, v in acc.bits if c == d]
        if positions != list(range(positions[0], positions[0] + len(positions))) if positions else False:
            raise ValueError(f"{instr}: the lanes' accumulator {('rows', 'columns')[d]} are not "
                             f"one run of consecutive bits")
        spt.append(1 << positions[0] if positions else size[d])
        tpw.append(1 << len(positions))
    reps = (size[0] // (spt[0] * tpw[0]), size[1] // (spt[1] * tpw[1]))
    slots = tuple((x % spt[0], x // (spt[0] * tpw[0]), y % spt[1], y // (spt[1] * tpw[1]))
                  for x, y in acc.base)
    return (spt[0], spt[1]), (tpw[0], tpw[1]), reps, (order[0], order[1]), slots


def check_instr(instr: MatrixInstr) -> None:
    """Raise ``ValueError`` unless ``instr``'s maps are affine over lane bits, cover the
    ``m x k``, ``k x n`` and ``m x n`` tiles (each element ``replicas`` times; accumulators
    once) and the accumulator forms a blocked layout."""
    geometry(instr)


@lru_cache(maxsize=None)
def geometry(instr: MatrixInstr) -> MatrixGeometry:
    """The ``MatrixGeometry`` of ``instr`` (checked: see ``check_instr``)."""
    lanes = instr.lanes
    if lanes & (lanes - 1) or instr.acc_count * lanes != instr.m * instr.n:
        raise ValueError(f"{instr}: {lanes} lanes cannot share an {instr.m} x {instr.n} accumulator")
    for count, pack, what in ((instr.a_count, instr.a_pack, "A"), (instr.b_count, instr.b_pack, "B")):
        if count % pack:
            raise ValueError(f"{instr}: {count} {what} elements a lane do not fill registers of {pack}")
    a = _split(instr.a_elem, instr.a_count, lanes, f"{instr} A")
    b = _split(instr.b_elem, instr.b_count, lanes, f"{instr} B")
    acc = _split(instr.acc_elem, instr.acc_count, lanes, f"{instr} accumulator")
    _check_cover(a, instr.a_count, lanes, (instr.m, instr.k), instr.a_replicas, f"{instr} A")
    _check_cover(b, instr.b_count, lanes, (instr.k, instr.n), instr.b_replicas, f"{instr} B")
    _check_cover(acc, instr.acc_count, lanes, (instr.m, instr.n), 1, f"{instr} accumulator")
    spt, tpw, reps, order, slots = _acc_geometry(instr, acc)
    return MatrixGeometry(a, b, acc, spt, tpw, reps, order, slots)
