"""The ``anytile`` command: ``backends``, ``compile``, ``demo``, ``run``, ``conformance``."""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

__all__ = ["main"]


#: the width the human-readable listings fit
WIDTH = 100


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns.  A phrase (ended by ': ' or '; ') that
    fits on a line is never split, so a reason stays readable (and greppable); a longer one
    is broken between words."""
    import re
    import textwrap

    lines: list[str] = []
    for phrase in re.split(r"(?<=[:;]) ", " ".join(text.split())):
        if lines and len(lines[-1]) + 1 + len(phrase) <= width:
            lines[-1] += " " + phrase
        elif len(phrase) <= width or not lines:
            lines += textwrap.wrap(phrase, width, break_on_hyphens=False) or [""]
        else:                       # split anyway: begin it where the last line ends
            lines[-1:] = textwrap.wrap(f"{lines[-1]} {phrase}", width, break_on_hyphens=False)
    return lines or [""]


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


# -- anytile backends -------------------------------------------------------------------------
def _backend_facts(record: Any) -> dict[str, Any]:
    """What ``anytile backends`` says about one plugin (its probes are time-limited and a
    wrong answer is reported, never raised)."""
    from .codegen.gpu.simulated_backend import SimulatedBackend
    from .runtime.discovery import ProbeFailed, probe

    avail = record.availability
    facts: dict[str, Any] = {
        "name": record.name, "version": record.version, "api_version": record.api_version,
        "usable": avail.usable, "reason": "" if avail.usable else avail.reason,
        "devices": [f"{d.name} ({d.description})" if d.description else d.name
                    for d in record.devices],
        "describe": {}, "entry_point": record.entry_point,
        "distribution": record.distribution, "notes": list(record.notes),
        "test_instrument": isinstance(record.backend, SimulatedBackend)}
    facts["_devices"] = [(d.name, d.description) for d in record.devices]
    if avail.usable:
        try:
            described = probe(f"{record.name}: describe()", record.backend.describe)
        except ProbeFailed as exc:
            described = {"error": str(exc)}
        if not isinstance(described, dict):
            described = {"error": f"describe() returned {type(described).__name__}, not a dict"}
        facts["describe"] = {str(k): v for k, v in described.items()}
    return facts


def _backends_table(listed: list[dict[str, Any]]) -> list[str]:
    rows = [[f["name"], str(f["version"]), "yes" if f["usable"] else "no"] for f in listed]
    header = ["backend", "version", "usable"]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]
    last = WIDTH - sum(widths) - 2 * len(widths)
    row_start = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  "  # noqa: E731
    out = [row_start(header) + "devices, or why not",
           row_start(["-" * w for w in widths]) + "-" * last]
    for facts, row in zip(listed, rows):
        if facts["usable"]:
            text = [_clip(f"{name}  {desc}".rstrip(), last) for name, desc in facts["_devices"]]
            text = text or ["(no devices)"]
        else:
            text = _wrap(facts["reason"] or "not usable", last)
        for note in facts["notes"]:
            text += _wrap(f"note: {note}", last)
        out.append(row_start(row) + text[0])
        out += [row_start(["", "", ""]) + more for more in text[1:]]
    return [line.rstrip() for line in out]


def _backend_details(facts: dict[str, Any]) -> list[str]:
    """One plugin, every fact, in ``WIDTH`` columns (``anytile backends -v``)."""
    state = "usable" if facts["usable"] else "not usable"
    origin = facts["entry_point"] + (f" from {facts['distribution']}" if facts["distribution"] else "")
    items = [("entry point", origin), ("backend API", str(facts["api_version"]))]
    if facts["test_instrument"]:
        items.append(("kind", "a test instrument (a GPU lowering run on the host CPU)"))
    items += [("device", f"{name} ({desc})" if desc else name) for name, desc in facts["_devices"]]
    if not facts["usable"]:
        items.append(("why not", facts["reason"]))
    items += [(str(k), str(v)) for k, v in facts["describe"].items()]
    items += [("note", note) for note in facts["notes"]]
    key_width = min(max(len(k) for k, _ in items), 20)
    out = [f"{facts['name']} {facts['version']}: {state}"]
    for key, value in items:
        lines = _wrap(value, WIDTH - key_width - 4)
        out.append(f"  {key:<{key_width}}  {lines[0]}".rstrip())
        out += [" " * (key_width + 4) + more for more in lines[1:]]
    return out


def cmd_backends(args: argparse.Namespace) -> int:
    from .runtime.discovery import list_backends

    every = [_backend_facts(record) for record in list_backends()]
    if args.json:                   # machine-readable: every plugin, test instruments marked
        print(json.dumps([{k: v for k, v in f.items() if not k.startswith("_")} for f in every],
                         indent=2, default=str))
        return 0
    # test instruments are listed when asked for, or when switched on (usable)
    hidden = [f["name"] for f in every if f["test_instrument"] and not f["usable"] and not args.all]
    listed = [f for f in every if f["name"] not in hidden]
    if not every:
        print("no anytile backends are installed")
        return 0
    if args.verbose:
        print("\n\n".join("\n".join(_backend_details(f)) for f in listed))
    else:
        print("\n".join(_backends_table(listed)))
    if hidden:
        print(f"\n{len(hidden)} test instruments not listed ({', '.join(hidden)}): "
              f"anytile backends --all")
    return 0


# -- anytile compile --------------------------------------------------------------------------
def _load_module(path: Path) -> Any:
    if not path.is_file():
        raise SystemExit(f"anytile: no such file: {path}")
    name = f"anytile_user_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"anytile: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _parse_pairs(items: Sequence[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise SystemExit(f"anytile: {what} '{part}' is not of the form NAME=VALUE")
            out[key.strip()] = value.strip()
    return out


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def cmd_compile(args: argparse.Namespace) -> int:
    from .runtime.compile import compile as aot_compile
    from .runtime.jit import JITFunction

    file_part, sep, kernel_name = args.kernel.rpartition(":")
    if not sep:
        raise SystemExit("anytile: name the kernel as FILE.py:KERNEL")
    module = _load_module(Path(file_part))
    kernel = getattr(module, kernel_name, None)
    if not isinstance(kernel, JITFunction):
        raise SystemExit(f"anytile: {file_part} has no @anytile.jit function '{kernel_name}'")
    constexprs = {k: _literal(v) for k, v in _parse_pairs(args.constexpr, "constexpr").items()}
    compiled = aot_compile(kernel, target=args.target,
                           signature=_parse_pairs(args.signature, "signature"),
                           constexprs=constexprs, num_warps=args.num_warps,
                           num_stages=args.num_stages)
    if args.emit == "list":
        print("\n".join(compiled.asm))
        return 0
    if args.emit == "metadata":
        print(json.dumps(compiled.metadata.to_json(), indent=2, default=str))
        return 0
    if args.emit not in compiled.asm:
        raise SystemExit(f"anytile: no stage '{args.emit}'; stages: {', '.join(compiled.asm)}")
    text = compiled.asm[args.emit]
    if isinstance(text, bytes):
        if args.output:
            Path(args.output).write_bytes(text)
            return 0
        sys.stdout.buffer.write(text)
        return 0
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text)
    return 0


# -- anytile demo -----------------------------------------------------------------------------
def _default_examples_dir() -> Optional[Path]:
    # an editable install or a checkout: core/anytile/cli.py -> <repo>/examples
    candidate = Path(__file__).resolve().parents[2] / "examples"
    return candidate if candidate.is_dir() else None


def cmd_demo(args: argparse.Namespace) -> int:
    from .runtime.devices import device as get_device, devices

    folder = Path(args.examples) if args.examples else _default_examples_dir()
    if folder is None or not folder.is_dir():
        raise SystemExit("anytile: no examples folder found; pass --examples DIR")
    targets = [get_device(d) for d in args.device] if args.device else devices()
    examples = [(p.stem, _load_module(p)) for p in sorted(folder.glob("*.py"))
                if not p.name.startswith("_")]
    examples = [(n, m) for n, m in examples if hasattr(m, "check")]
    rows, failed = [], 0
    for name, module in examples:
        for dev in targets:
            started = time.perf_counter()
            try:
                result = module.check(dev)
                status = "ok" if result.get("ok", False) else "WRONG"
                detail = result.get("detail", "")
            except Exception as exc:
                status, detail = "ERROR", f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            failed += status != "ok"
            rows.append([name, str(dev), status, f"{time.perf_counter() - started:.2f}s", detail])
    print(_table(rows, ["example", "device", "result", "time", "detail"]))
    print(f"\n{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


# -- anytile run -------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    """Run a Python program as ``python PROGRAM ARGS`` would, on ``--device``; with
    ``--as-triton`` its ``import triton`` gives anytile (``anytile.triton_compat``)."""
    import runpy
    import traceback

    from . import triton_compat
    from .errors import AnytileError
    from .runtime.devices import device

    path = Path(args.program)
    if not path.is_file():
        raise ValueError(f"program '{args.program}' is not a file")
    if args.benchmarks:
        os.environ["ANYTILE_BENCHMARKS"] = args.benchmarks
    if args.device:
        device(args.device)             # an unknown or unusable device is said here, once
        os.environ["ANYTILE_DEVICE"] = args.device
    if args.as_triton:
        triton_compat.install(args.device)
    sys.argv = [str(path)] + list(args.args)
    sys.path.insert(0, str(path.resolve().parent))
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:           # as python does: a non-int code is printed, status 1
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except AnytileError:
        raise                           # main prints its message (it names the kernel line)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:            # the program's own failure: its traceback, as python's
        tb = exc.__traceback__          # from the program's first frame (not anytile run's)
        while tb is not None and Path(tb.tb_frame.f_code.co_filename).resolve() != path.resolve():
            tb = tb.tb_next
        frames = traceback.extract_tb(tb or exc.__traceback__)
        inside = str(Path(__file__).resolve().parent)
        while len(frames) > 1 and str(Path(frames[-1].filename).resolve()).startswith(inside):
            frames.pop()                # where anytile raised it: the program's line says more
        print("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
              + "".join(traceback.format_exception_only(type(exc), exc)), end="",
              file=sys.stderr)
        return 1
    return 0


# -- anytile conformance ----------------------------------------------------------------------
def cmd_conformance(argv: list[str]) -> int:
    try:
        from anytile_conformance.cli import main as conformance_main  # type: ignore
    except ImportError:
        print("anytile: the conformance suite is not installed "
              "(pip install -e conformance, or pip install anytile-conformance)", file=sys.stderr)
        return 2
    return int(conformance_main(argv) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="anytile", description="Tile kernels written in Python, run on every installed "
                                    "backend.  'anytile COMMAND -h' tells more about a command.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("backends", help="list installed backends, their devices, and why not")
    p.add_argument("--all", action="store_true",
                   help="list test instruments too (GPU lowerings simulated on the host CPU)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="every detail: entry point, distribution, driver facts")
    p.add_argument("--json", action="store_true",
                   help="machine-readable output (every backend, test instruments marked)")
    p = sub.add_parser("compile", help="compile a kernel ahead of time and print one stage")
    p.add_argument("kernel", help="FILE.py:KERNEL")
    p.add_argument("--target", required=True, help="e.g. nvidia:sm_90, cpu:<cpu name>, interpreter:reference")
    p.add_argument("--signature", action="append", default=[],
                   help="NAME=TYPE[,NAME=TYPE...], e.g. x_ptr=*fp32,n=i32 (':16' marks divisibility)")
    p.add_argument("--constexpr", action="append", default=[], help="NAME=VALUE (repeatable)")
    p.add_argument("--num-warps", type=int, default=4)
    p.add_argument("--num-stages", type=int, default=3)
    p.add_argument("--emit", default="ir", help="stage to print ('list' lists them; 'metadata')")
    p.add_argument("-o", "--output", help="write the stage to this file")
    p = sub.add_parser("demo", help="run the example kernels on every usable device")
    p.add_argument("--examples", help="folder of example scripts (default: the repo's examples/)")
    p.add_argument("--device", action="append", default=[], help="only these devices")
    p = sub.add_parser("run", help="run a Python program on a device; --as-triton: unmodified "
                                   "Triton programs (import triton gives anytile)")
    p.add_argument("--as-triton", action="store_true",
                   help="serve 'import triton' and its public submodules from anytile")
    p.add_argument("--device", help="the device kernels run on (default: ANYTILE_DEVICE, else "
                                    "anytile's default device)")
    p.add_argument("--benchmarks", choices=["all", "first", "none"],
                   help="perf_report sweeps: every x value (default), the first only, or none")
    p.add_argument("program", help="the Python file to run as __main__")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the program")
    sub.add_parser("conformance", help="run the conformance suite (anytile conformance --help)",
                   add_help=False)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    from .errors import AnytileError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "conformance":
        try:
            return cmd_conformance(argv[1:])
        except KeyboardInterrupt:   # before the suite took over Ctrl-C (importing, listing)
            print("anytile: interrupted", file=sys.stderr)
            return 130
    args = build_parser().parse_args(argv)
    handler = {"backends": cmd_backends, "compile": cmd_compile, "demo": cmd_demo,
               "run": cmd_run}[args.command]
    try:
        return handler(args)
    except AnytileError as exc:
        print(f"anytile: error: {exc}", file=sys.stderr)
        return 1
    except (TypeError, ValueError) as exc:
        print(f"anytile: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("anytile: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:         # the reader of our output went away (| head): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
