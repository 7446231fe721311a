#!/usr/bin/env python3
"""Run another project's Triton programs with anytile standing in for Triton.

    python tests/triton_compat/run_upstream.py --triton ~/src/triton [--device cpu] [FILE ...]

``--triton`` takes a checkout of Triton and runs its tutorials (``python/tutorials/*.py``);
any FILE given (a standalone Triton script from anywhere) runs too; ``--jobs N`` runs N files
at once.  Each file runs as ``__main__`` in its own Python process, in a scratch working
folder, where ``import triton`` and ``import triton.language`` resolve to anytile through an
import hook: the files are read where they are and nothing of theirs is copied.  The table
gives, for each file:

* ``ran``: it executed to the end (its own checks, where it has any, passed);
* ``failed``: the exception it ended with (an anytile compile error names the kernel line);
* ``skipped``: why it was not started: it imports a module not installed here, it needs torch
  CUDA and the device is not an NVIDIA one, or it uses a Triton host API that anytile does
  not provide (``triton.autotune``, ``triton.heuristics``, ``triton.Config``, ...), or, met
  while running, a part of ``triton.runtime``/``triton.testing`` this runner does not serve.

Stand-ins for the host side are few and named here: ``triton.jit``, ``triton.cdiv``,
``triton.next_power_of_2``, ``triton.language`` (and its ``extra`` modules),
``triton.runtime.driver.active.get_active_torch_device()`` (the torch device matching
``--device``) and ``.get_current_target().backend`` (``"cuda"`` or ``"cpu"``), and ``triton.testing.perf_report``/``Benchmark``, whose decorated benchmark's
``run()`` does nothing: timings are not taken, and the row says so.  A developer tool, not a
test; its exit status is 1 when any file failed."""
from __future__ import annotations

import argparse
import ast
import functools
import importlib
import importlib.abc
import importlib.util
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HOST_STAND_INS = {"jit", "cdiv", "next_power_of_2", "language", "runtime", "testing"}


# -- what a file needs, read from its syntax tree before running it -------------------------------
def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id] + parts[::-1])
    return None


def scan(source: str) -> dict:
    """The Triton host APIs a file names (``triton.<name>``), the other top-level modules it
    imports, and whether it asks for CUDA (``torch.cuda``, ``.cuda()``, a "cuda" device)."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                modules.add(a.name.split(".")[0])
                if a.name.split(".")[0] == "triton":
                    aliases[a.asname or "triton"] = a.name if a.asname else "triton"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
            if node.module.split(".")[0] == "triton":
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    used = set(aliases.values())
    wants_cuda = False
    for node in ast.walk(tree):
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
        if dotted:
            root, _, rest = dotted.partition(".")
            if root in aliases and rest:
                used.add(f"{aliases[root]}.{rest}")
            wants_cuda |= dotted.startswith("torch.cuda")
        if isinstance(node, ast.Call):
            wants_cuda |= isinstance(node.func, ast.Attribute) and node.func.attr == "cuda"
            device_args = [k.value for k in node.keywords if k.arg == "device"]
            if _dotted(node.func) == "torch.device":
                device_args += node.args[:1]
            wants_cuda |= any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                              and a.value.split(":")[0] == "cuda" for a in device_args)
    names = {p.split(".")[1] for p in used if p.startswith("triton.")}
    return {"missing": sorted(names - HOST_STAND_INS), "modules": sorted(modules - {"triton"}),
            "cuda": wants_cuda}


# -- the child: one file, triton redirected to anytile -------------------------------------------
class NotProvided(Exception):
    """A Triton host API the runner does not stand in for."""


class _Namespace(types.ModuleType):
    """A stand-in module: the attributes it was given, ``NotProvided`` for any other."""

    def __init__(self, name: str, **attrs) -> None:
        super().__init__(name)
        self.__path__: list = []  # a package, so that submodule imports reach the finder
        self.__dict__.update(attrs)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise NotProvided(f"{self.__name__}.{attr}")


class _Benchmark:
    """What ``triton.testing.perf_report`` returns: a benchmark whose ``run`` takes no timings."""
    runs_declined = 0

    def __init__(self, fn) -> None:
        self.fn = fn

    def run(self, *args, **kwargs) -> None:
        _Benchmark.runs_declined += 1


def _stand_ins(device: str) -> dict:
    import anytile as at
    import anytile.language as tl

    def torch_device():
        import torch
        return torch.device(device if device.startswith("cuda") else "cpu")

    target = _Namespace("triton.runtime.driver.active.get_current_target()",
                        backend="cuda" if device.startswith("cuda") else "cpu")
    active = _Namespace("triton.runtime.driver.active", get_active_torch_device=torch_device,
                        get_current_target=lambda: target)
    runtime = _Namespace("triton.runtime", driver=_Namespace("triton.runtime.driver",
                                                             active=active))
    testing = _Namespace("triton.testing", perf_report=lambda *a, **k: _Benchmark,
                         Benchmark=lambda *a, **k: None)
    triton = _Namespace("triton", jit=at.jit, cdiv=at.cdiv, next_power_of_2=at.next_power_of_2,
                        language=tl, runtime=runtime, testing=testing)
    return {"triton": triton, "triton.runtime": runtime, "triton.testing": testing}


class _TritonRedirect(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``triton`` and ``triton.*`` imports served by the stand-ins and ``anytile.language``."""

    def __init__(self, stand_ins: dict) -> None:
        self.stand_ins = stand_ins

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] != "triton":
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        name = spec.name
        if name in self.stand_ins:
            return self.stand_ins[name]
        if name.startswith("triton.language"):
            obj = importlib.import_module("anytile.language")
            for part in name.split(".")[2:]:
                obj = getattr(obj, part, None)
                if obj is None:
                    raise ModuleNotFoundError(f"anytile has no counterpart of {name}", name=name)
            return obj
        raise NotProvided(name)

    def exec_module(self, module) -> None:
        pass


def run_child(path: str, device: str, result_path: str) -> None:
    """Run one file as ``__main__`` with triton redirected; write its row to ``result_path``."""
    os.environ["ANYTILE_DEVICE"] = device
    sys.meta_path.insert(0, _TritonRedirect(_stand_ins(device)))
    sys.argv = [path]
    sys.path.insert(0, os.path.dirname(path))  # as `python FILE` would
    result: dict = {"result": "ran", "detail": ""}
    try:
        runpy.run_path(path, run_name="__main__")
        if _Benchmark.runs_declined:
            result["detail"] = "benchmarks not run"
    except NotProvided as exc:
        result = {"result": "skipped", "detail": f"uses {exc} (no anytile stand-in)"}
    except SystemExit as exc:
        if exc.code not in (None, 0):
            result = {"result": "failed", "detail": f"exited with status {exc.code}"}
    except BaseException as exc:  # noqa: BLE001 - any failure of the file is its row
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        where = f"{lines[0]}: " if len(lines) > 1 else ""
        result = {"result": "failed",
                  "detail": f"{type(exc).__name__}: {where}{lines[-1] if lines else ''}"}
        traceback.print_exc()
    Path(result_path).write_text(json.dumps(result))


# -- the parent: find the files, run each in a fresh process, print the table --------------------
@functools.lru_cache(maxsize=None)
def _torch_has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def plan(path: Path, device: str) -> str | None:
    """Why ``path`` cannot be run here, or ``None``."""
    try:
        needs = scan(path.read_text())
    except SyntaxError as exc:
        return f"not Python this interpreter parses ({exc.msg})"
    if needs["missing"]:
        return "uses " + ", ".join(f"triton.{n}" for n in needs["missing"]) + " (not in anytile)"
    beside = {p.stem for p in path.parent.iterdir()}  # modules next to the file import too
    absent = [m for m in needs["modules"]
              if m not in beside and importlib.util.find_spec(m) is None]
    if absent:
        return f"needs {', '.join(absent)} (not installed)"
    if needs["cuda"] and not (device.startswith("cuda") and _torch_has_cuda()):
        return "needs torch CUDA and an NVIDIA device (--device cuda:0)"
    return None


def run_file(path: Path, device: str, timeout: float, verbose: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="anytile-upstream-") as scratch:
        result_path = os.path.join(scratch, "result.json")
        env = dict(os.environ, MPLBACKEND="Agg")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", str(path.resolve()),
               "--device", device, "--result", result_path]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"result": "failed", "detail": f"timed out after {timeout:.0f} s"}
        row = (json.loads(Path(result_path).read_text()) if os.path.exists(result_path) else
               {"result": "failed", "detail": f"the process died (status {proc.returncode})"})
        row["seconds"] = round(time.monotonic() - start, 1)
        output = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        if row["result"] == "ran" and output:
            row["detail"] = "; ".join(filter(None, [output[-1][:90], row["detail"]]))
        if verbose and row["result"] == "failed":
            print(f"--- {path}\n{proc.stdout}{proc.stderr}", file=sys.stderr)
        return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="more Triton scripts to run")
    ap.add_argument("--triton", type=Path, help="a Triton checkout: runs python/tutorials/*.py")
    ap.add_argument("--device", help="anytile device (default: anytile's default device)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per file")
    ap.add_argument("--jobs", type=int, default=1, help="files run at once (default 1)")
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="show failed files' output")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_child(args.child, args.device, args.result)
        return 0

    files = list(args.files)
    if args.triton:
        tutorials = args.triton / "python" / "tutorials"
        if not tutorials.is_dir():
            ap.error(f"{tutorials} is not a folder: is {args.triton} a Triton checkout?")
        files = sorted(tutorials.glob("*.py")) + files
    if not files:
        ap.error("nothing to run: give --triton CHECKOUT or script paths")
    import anytile as at
    device = args.device or at.default_device().name
    try:
        at.device(device)  # an unknown or unusable device is said once, here
    except at.AnytileError as exc:
        ap.error(str(exc))

    def row_of(path: Path) -> dict:
        reason = plan(path, device)
        row = {"result": "skipped", "detail": reason} if reason else \
            run_file(path, device, args.timeout, args.verbose)
        return {"file": str(path), **row}

    rows = []
    print(f"{'file':<48} {'result':<8} detail")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(row_of, files):  # in file order, each as soon as it is known
            rows.append(row)
            print(f"{Path(row['file']).name:<48} {row['result']:<8} {row['detail']}", flush=True)
    counts = {k: sum(r["result"] == k for r in rows) for k in ("ran", "failed", "skipped")}
    print(f"\ndevice {device}: {counts['ran']} ran, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
