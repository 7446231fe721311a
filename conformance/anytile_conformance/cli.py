"""``anytile conformance [--backend NAME | --device DEV] [--quick | --full] [--junit FILE]
[--json FILE] [-k EXPR] [--fuzz N --seed S]``.

Exit status: 0 only when the verdict is CONFORMANT (or, with ``--fuzz``, when no generated
kernel disagreed with the interpreter); 1 otherwise; 2 for usage errors (unknown device, a
report path that cannot be written...); 130 when interrupted (Ctrl-C), the reports then
saying INTERRUPTED.
"""
from __future__ import annotations

import argparse
import contextlib
import math
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
    parser.add_argument("--timeout", type=_seconds, default=300.0,
                        help=f"seconds one case may run before it fails (default 300, at most "
                             f"{MAX_TIMEOUT:g})")
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


#: the longest per-case limit (the interval timer takes no more on every platform)
MAX_TIMEOUT = 1e6


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0.001 <= value <= MAX_TIMEOUT):
        raise argparse.ArgumentTypeError(f"--timeout wants a number of seconds from 0.001 to "
                                         f"{MAX_TIMEOUT:g}, got {text!r}")
    return value


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
    if args.tolerances:
        from .tolerances import table_rows
        for what, dtype, bound in table_rows():
            print(f"{what:<40} {dtype:<10} {bound}")
        return 0
    from .selection import SelectionError, compile_expression
    try:
        keep = compile_expression(args.expr)
    except SelectionError as exc:
        return _usage_error(str(exc))
    if args.list:
        for case in selected_cases(args, keep):
            print(case.id)
        return 0
    from .report import ReportError, ReportFiles, run_header
    reports = ReportFiles(args.json, args.junit)
    if args.fuzz is not None and reports.paths:
        return _usage_error("--json and --junit report a catalogue run; a fuzz run saves each "
                            "mismatch as a reproducer in --fuzz-dir")
    problem = reports.problem()
    if problem:
        return _usage_error(problem)
    header = run_header(args.mode, args.seed, args.device or args.backend or "default device")
    try:
        reports.start(header)       # no earlier verdict outlives this run, however it ends
    except ReportError as exc:
        return _usage_error(str(exc))
    try:
        return _run(args, keep, reports, header)
    except KeyboardInterrupt:       # before any case ran (a run's own Ctrl-C is handled there)
        from .runner import SuiteRun
        return _interrupted(SuiteRun(header, unfinished="INTERRUPTED: stopped before any case "
                                                        "ran; no verdict"), reports)


def _run(args: argparse.Namespace, keep, reports, header: dict) -> int:
    from anytile.errors import BackendError

    from .report import ReportError
    from .runner import SuiteRun
    try:
        device = resolve_device(args)
    except (BackendError, KeyError, ValueError) as exc:
        with contextlib.suppress(ReportError):   # the error below says why
            reports.write(SuiteRun(header, unfinished=f"NOT RUN: {exc}"))
        return _usage_error(str(exc))
    if args.fuzz is not None:
        from .fuzz.campaign import run_campaign
        return run_campaign(device, args.fuzz, args.seed, args.fuzz_dir)
    return certify(device, args, keep, reports)


def _usage_error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _interrupted(run, reports) -> int:
    """Ctrl-C: the reports say INTERRUPTED with the cases that ran; one line says so."""
    from .report import ReportError
    where = ""
    try:
        reports.write(run)
        where = f"; reports: {', '.join(reports.paths)}" if reports.paths else ""
    except ReportError as exc:
        where = f"; {exc}"
    except KeyboardInterrupt:       # a second Ctrl-C: the reports still say INCOMPLETE
        where = "; the reports say INCOMPLETE"
    start = "\n" if sys.stdout.isatty() else ""   # after a progress bar's unfinished line
    print(f"{start}anytile conformance: {run.verdict}{where}", file=sys.stderr)
    return 130


def certify(device, args: argparse.Namespace, keep, reports) -> int:
    """Run the selected cases on ``device``, print the summary, write the reports."""
    from .report import Progress, ReportError, summary_text
    from .runner import run_suite
    cases = selected_cases(args, keep)
    shard = "" if args.shard == (0, 1) else f" (shard {args.shard[0]}/{args.shard[1]})"
    print(f"running {len(cases)} {args.mode} cases{shard} on {device.info.name} "
          f"({device.backend.name})", flush=True)
    run = run_suite(device, cases, args.mode, args.seed, on_result=Progress(), timeout=args.timeout)
    if run.unfinished:
        return _interrupted(run, reports)
    print()
    print(summary_text(run))
    try:
        reports.write(run)
    except ReportError as exc:
        return _usage_error(str(exc))
    return 0 if run.conformant else 1
