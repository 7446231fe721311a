"""``anytile conformance [--backend NAME | --device DEV] [--quick | --full] [--junit FILE]
[--json FILE] [-k EXPR] [--fuzz N --seed S]``.

Exit status: 0 only when the verdict is CONFORMANT (or, with ``--fuzz``, when no generated
kernel disagreed with the interpreter); 1 otherwise; 2 for usage errors (unknown device...).
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from . import __version__

DEFAULT_SEED = 20261122


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="anytile conformance",
        description="Certify that an anytile backend runs kernels as the reference interpreter "
                    "defines them.  Prints a table by area and CONFORMANT or NOT CONFORMANT.")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--backend", help="backend name (its first device), e.g. cpu")
    target.add_argument("--device", help="device name, e.g. cpu:0, cuda:1, interpreter")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="a representative subset, minutes even on the interpreter (default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="every dtype, shape, warp count and grid rank: thousands of cases")
    parser.set_defaults(mode="quick")
    parser.add_argument("-k", dest="expr", default="",
                        help="only cases whose id matches EXPR (substrings with and/or/not)")
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    parser.add_argument("--json", metavar="FILE", help="write a JSON report")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"seed of all random inputs and generated kernels (default {DEFAULT_SEED})")
    parser.add_argument("--fuzz", type=_positive(int, "--fuzz"), metavar="N",
                        help="instead of the catalogue, compare N random kernels with the interpreter")
    parser.add_argument("--fuzz-dir", default="anytile-fuzz",
                        help="where shrunk reproducers of fuzz mismatches are written")
    parser.add_argument("--timeout", type=_positive(float, "--timeout"), default=300.0,
                        help="seconds one case may run before it fails (default 300)")
    parser.add_argument("--shard", metavar="K/N", type=_shard, default=(0, 1),
                        help="run only every N-th selected case, starting with the K-th (0-based): "
                             "N processes or machines share a full run")
    parser.add_argument("--list", action="store_true", help="list the selected case ids and exit")
    parser.add_argument("--tolerances", action="store_true", help="print the tolerance table and exit")
    parser.add_argument("--version", action="version", version=f"anytile-conformance {__version__}")
    return parser


def _positive(kind: type, option: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} wants a positive {kind.__name__}, "
                                             f"got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{option} wants a positive {kind.__name__}, "
                                             f"got {text!r}")
        return value
    return parse


#: options whose value may start with '-' (argparse would read "--shard -1/2" as two options)
_VALUED = ("--shard", "--fuzz", "--timeout", "--seed")


def _join_values(argv: list[str]) -> list[str]:
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in _VALUED and arg.startswith("-") and arg not in _VALUED:
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def _check_writable(path: str, option: str) -> Optional[str]:
    """Why the report ``path`` cannot be written, or ``None`` (checked before a long run)."""
    import os
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        return f"{option} {path}: cannot write the report there ({exc.strerror or exc})"
    if not existed:
        os.unlink(path)
    return None


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard wants K/N (e.g. 0/4), got {text!r}") from None
    if not (n >= 1 and 0 <= k < n):
        raise argparse.ArgumentTypeError(f"--shard K/N needs 0 <= K < N, got {text!r}")
    return k, n


def selected_cases(args: argparse.Namespace, keep) -> list:
    """The catalogue cases of ``args.mode`` that ``-k`` keeps, then this shard's share."""
    from .case import expand_all
    cases = [c for c in expand_all(args.mode) if keep(c.id)]
    k, n = args.shard
    return cases[k::n]


def resolve_device(args: argparse.Namespace):
    """The device to certify: ``--device``, the first device of ``--backend``, or the
    default device (``ANYTILE_DEVICE`` or the first non-reference host backend)."""
    import anytile as at
    if args.device:
        return at.device(args.device)
    return at.device(args.backend)      # a backend name gives its first device; None the default


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``anytile conformance`` and ``python -m anytile_conformance``."""
    args = build_parser().parse_args(_join_values(list(sys.argv[1:] if argv is None else argv)))
    for option, path in (("--json", args.json), ("--junit", args.junit)):
        problem = _check_writable(path, option) if path else None
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    if args.tolerances:
        from .tolerances import table_rows
        for what, dtype, bound in table_rows():
            print(f"{what:<40} {dtype:<10} {bound}")
        return 0
    from .selection import SelectionError, compile_expression
    try:
        keep = compile_expression(args.expr)
    except SelectionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for case in selected_cases(args, keep):
            print(case.id)
        return 0
    from anytile.errors import BackendError
    try:
        device = resolve_device(args)
    except (BackendError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.fuzz is not None:
        from .fuzz.campaign import run_campaign
        return run_campaign(device, args.fuzz, args.seed, args.fuzz_dir)
    return certify(device, args, keep)


def certify(device, args: argparse.Namespace, keep) -> int:
    from .report import Progress, summary_text, write_json, write_junit
    from .runner import run_suite
    cases = selected_cases(args, keep)
    shard = "" if args.shard == (0, 1) else f" (shard {args.shard[0]}/{args.shard[1]})"
    print(f"running {len(cases)} {args.mode} cases{shard} on {device.info.name} "
          f"({device.backend.name})", flush=True)
    run = run_suite(device, cases, args.mode, args.seed, on_result=Progress(), timeout=args.timeout)
    print()
    print(summary_text(run))
    if args.json:
        write_json(run, args.json)
    if args.junit:
        write_junit(run, args.junit)
    return 0 if run.conformant else 1
