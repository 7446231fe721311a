#!/usr/bin/env python3
"""Run another project's Triton programs with anytile standing in for Triton, as a table.

    python tests/triton_compat/run_upstream.py --triton ~/src/triton [--device cpu] [FILE ...]

``--triton`` takes a checkout of Triton and runs its tutorials (``python/tutorials/*.py``);
any FILE given (a standalone Triton script from anywhere) runs too; ``--jobs N`` runs N files
at once.  Each file runs in its own process, in a scratch working folder, as
``anytile run --as-triton --device DEVICE --benchmarks first FILE`` (``anytile.triton_compat``:
``import triton`` gives anytile; a ``perf_report`` benchmark sweeps its first x value only, so
that it is checked to run, quickly): the files are read where they are and nothing of theirs
is copied.  The table gives, for each file:

* ``ran``: it executed to the end (its own checks, where it has any, passed);
* ``failed``: the error it ended with (an anytile compile error names the kernel line);
* ``skipped``: why it did not run to the end: it imports a module not installed here, it
  needs torch CUDA and the device is not an NVIDIA one, or (met while running) it uses a part
  of Triton that anytile does not provide.

A developer tool, not a test; its exit status is 1 when any file failed."""
from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


# -- what a file needs, read from its syntax tree before running it -------------------------------
def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id] + parts[::-1])
    return None


def _unconditional(body: list) -> list:
    """The statements of a module body run whatever happens: into ``if``/``with`` blocks, not
    into ``try`` blocks, functions or classes."""
    found = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If):
            found += _unconditional(node.body) + _unconditional(node.orelse)
        elif isinstance(node, ast.With):
            found += _unconditional(node.body)
    return found


def scan(source: str) -> dict:
    """The top-level modules a file imports unconditionally (at module level, outside
    ``try`` blocks: ``try: import apex`` is optional), and whether it asks for CUDA
    (``torch.cuda``, ``.cuda()``, a "cuda" device)."""
    tree = ast.parse(source)
    modules: set[str] = set()
    wants_cuda = False
    for node in _unconditional(tree.body):
        if isinstance(node, ast.Import):
            modules.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    for node in ast.walk(tree):
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
        wants_cuda |= bool(dotted and dotted.startswith("torch.cuda"))
        if isinstance(node, ast.Call):
            wants_cuda |= isinstance(node.func, ast.Attribute) and node.func.attr == "cuda"
            device_args = [k.value for k in node.keywords if k.arg == "device"]
            if _dotted(node.func) == "torch.device":
                device_args += node.args[:1]
            wants_cuda |= any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                              and a.value.split(":")[0] == "cuda" for a in device_args)
    return {"modules": sorted(modules - {"triton"}), "cuda": wants_cuda}


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
    beside = {p.stem for p in path.parent.iterdir()}  # modules next to the file import too
    absent = [m for m in needs["modules"]
              if m not in beside and importlib.util.find_spec(m) is None]
    if absent:
        return f"needs {', '.join(absent)} (not installed)"
    if needs["cuda"] and not (device.startswith("cuda") and _torch_has_cuda()):
        return "needs torch CUDA and an NVIDIA device (--device cuda:0)"
    return None


def run_file(path: Path, device: str, timeout: float, verbose: bool,
             logs: Path | None = None) -> dict:
    from anytile.triton_compat import NOT_PROVIDED_HINT
    with tempfile.TemporaryDirectory(prefix="anytile-upstream-") as scratch:
        env = dict(os.environ, MPLBACKEND="Agg")
        cmd = [sys.executable, "-m", "anytile", "run", "--as-triton", "--device", device,
               "--benchmarks", "first", str(path.resolve())]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            if logs is not None:   # what it printed before it was stopped
                partial = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                           for x in (exc.stdout, exc.stderr)]
                (logs / f"{path.stem}.log").write_text(
                    "".join(partial) + f"\ntimed out after {timeout:.0f} s\n")
            return {"result": "failed", "detail": f"timed out after {timeout:.0f} s"}
    seconds = round(time.monotonic() - start, 1)
    if logs is not None:
        (logs / f"{path.stem}.log").write_text(proc.stdout + proc.stderr)
    output = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    errors = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(" ")
              and "Warning" not in ln]
    if proc.returncode == 0:
        row = {"result": "ran", "detail": output[-1][:90] if output else ""}
    elif errors and NOT_PROVIDED_HINT in errors[-1]:
        missing = errors[-1].split(NOT_PROVIDED_HINT)[0].rstrip(" (")
        row = {"result": "skipped", "detail": missing.split(": ", 1)[-1]}
    else:
        detail = errors[-1] if errors else f"exited with status {proc.returncode}"
        if "anytile: error: " in proc.stderr:       # an anytile error: where, then what
            at = proc.stderr.index("anytile: error: ")
            lines = [ln for ln in proc.stderr[at:].splitlines() if ln.strip()]
            detail = lines[0] + (f": {lines[-1].strip()}" if len(lines) > 1 else "")
        row = {"result": "failed", "detail": detail}
    if verbose and row["result"] == "failed":
        print(f"--- {path}\n{proc.stdout}{proc.stderr}", file=sys.stderr)
    return {**row, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="more Triton scripts to run")
    ap.add_argument("--triton", type=Path, help="a Triton checkout: runs python/tutorials/*.py")
    ap.add_argument("--device", help="anytile device (default: anytile's default device)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per file")
    ap.add_argument("--jobs", type=int, default=1, help="files run at once (default 1)")
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="show failed files' output")
    ap.add_argument("--logs", type=Path, help="write each file's whole output to LOGS/NAME.log")
    args = ap.parse_args(argv)
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
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
            run_file(path, device, args.timeout, args.verbose, args.logs)
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
