"""``anytile.testing``, as Triton's ``triton.testing``: ``do_bench`` (time a function on any
device), ``assert_close``, and ``perf_report``/``Benchmark`` (sweep a benchmark over
parameters, print a table, plot it when matplotlib is installed)."""
from __future__ import annotations

import copy
import os
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .runtime.bench import do_bench

__all__ = ["do_bench", "assert_close", "Benchmark", "Mark", "perf_report"]


def _as_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach") and hasattr(x, "cpu"):        # torch tensors
        x = x.detach().cpu()
        if str(getattr(x, "dtype", "")) == "torch.bfloat16":
            x = x.float()
        return x.numpy()
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return x.numpy()
    return np.asarray(x)


def assert_close(x: Any, y: Any, atol: Optional[float] = None, rtol: Optional[float] = None,
                 err_msg: str = "") -> None:
    """Raise ``AssertionError`` unless ``x`` and ``y`` (anytile, NumPy or torch arrays, or
    scalars) agree elementwise within ``atol + rtol * |y|`` (defaults: ``atol=1e-2``,
    ``rtol=0``, as Triton's)."""
    a = _as_numpy(x).astype(np.float64)
    b = _as_numpy(y).astype(np.float64)
    np.testing.assert_allclose(a, b, atol=1e-2 if atol is None else atol,
                               rtol=0.0 if rtol is None else rtol, err_msg=err_msg)


class Benchmark:
    """One sweep: ``x_names`` take each of ``x_vals``; one line per ``line_vals`` value of the
    argument ``line_arg`` (named ``line_names``); ``args`` are passed to every call."""

    def __init__(self, x_names: Sequence[str], x_vals: Sequence[Any], line_arg: str,
                 line_vals: Sequence[Any], line_names: Sequence[str], plot_name: str,
                 args: Optional[dict[str, Any]] = None, xlabel: str = "", ylabel: str = "",
                 x_log: bool = False, y_log: bool = False,
                 styles: Optional[Sequence[Any]] = None, color: Any = None) -> None:
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        self.plot_name = plot_name
        self.args = dict(args or {})
        self.xlabel, self.ylabel = xlabel, ylabel
        self.x_log, self.y_log = x_log, y_log
        self.styles = styles


class Mark:
    """A benchmark function under ``perf_report``: ``.run()`` sweeps and reports it."""

    def __init__(self, fn: Callable[..., Any], benchmarks: Any) -> None:
        self.fn = fn
        self.benchmarks = benchmarks

    def _sweep(self, bench: Benchmark, **kwargs: Any) -> list[dict[str, Any]]:
        rows = []
        for x in self.x_values(bench):
            xs = dict(zip(bench.x_names, x))
            row: dict[str, Any] = dict(xs)
            for value, name in zip(bench.line_vals, bench.line_names):
                result = self.fn(**xs, **{bench.line_arg: value}, **bench.args, **kwargs)
                if isinstance(result, (tuple, list)):
                    row[name], row[f"{name}-min"], row[f"{name}-max"] = result[:3]
                else:
                    row[name] = result
            rows.append(row)
        return rows

    @staticmethod
    def x_values(bench: Benchmark) -> list[tuple]:
        return [tuple(x) if isinstance(x, (tuple, list)) else (x,) * len(bench.x_names)
                for x in bench.x_vals]

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "",
            return_df: bool = False, **kwargs: Any) -> Any:
        """Sweep every benchmark; print each table when ``print_data``; write
        ``PLOT_NAME.csv`` (and ``.png`` with matplotlib) under ``save_path``; plot when
        ``show_plots``.  Returns the rows (a pandas DataFrame each with ``return_df`` when
        pandas is installed)."""
        benches = self.benchmarks if isinstance(self.benchmarks, list) else [self.benchmarks]
        mode = _sweep_mode()
        results = []
        for bench in benches:
            if mode == "none":
                print(f"{bench.plot_name}: not run (ANYTILE_BENCHMARKS=none)")
                results.append(_frame([]) if return_df else [])
                continue
            if mode == "first":
                bench = copy.copy(bench)
                bench.x_vals = bench.x_vals[:1]
            rows = self._sweep(bench, **kwargs)
            columns = bench.x_names + bench.line_names
            table = _table(rows, columns)
            if print_data:
                print(f"{bench.plot_name}:\n{table}")
            if save_path:
                os.makedirs(save_path, exist_ok=True)
                with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as f:
                    f.write(",".join(columns) + "\n")
                    f.writelines(",".join(str(r.get(c, "")) for c in columns) + "\n" for r in rows)
            if show_plots or save_path:
                _plot(bench, rows, show_plots, save_path)
            results.append(_frame(rows) if return_df else rows)
        return results[0] if len(results) == 1 else results


def _sweep_mode() -> str:
    """``ANYTILE_BENCHMARKS``: ``all`` (the default) sweeps every x value, ``first`` only the
    first (checks that a benchmark runs, quickly), ``none`` runs nothing and says so."""
    mode = os.environ.get("ANYTILE_BENCHMARKS", "all").strip().lower() or "all"
    if mode not in ("all", "first", "none"):
        raise ValueError(f"ANYTILE_BENCHMARKS={mode!r}: expected 'all', 'first' or 'none'")
    return mode


def perf_report(benchmarks: Any) -> Callable[[Callable[..., Any]], Mark]:
    """Decorate a benchmark function with its ``Benchmark`` (or a list of them)."""
    return lambda fn: Mark(fn, benchmarks)


def _table(rows: list[dict], columns: list[str]) -> str:
    cells = [[f"{r.get(c, ''):.6g}" if isinstance(r.get(c), float) else str(r.get(c, ""))
              for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _frame(rows: list[dict]) -> Any:
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.DataFrame(rows)


def _plot(bench: Benchmark, rows: list[dict], show: bool, save_path: str) -> None:
    try:
        import matplotlib
        if not show:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return                       # plotting is optional: the table and CSV stand
    fig, ax = plt.subplots()
    xs = [r[bench.x_names[0]] for r in rows]
    for i, name in enumerate(bench.line_names):
        style = bench.styles[i] if bench.styles and i < len(bench.styles) else None
        kw = {"color": style[0], "linestyle": style[1]} if style else {}
        ax.plot(xs, [r.get(name) for r in rows], label=name, **kw)
    ax.set_xlabel(bench.xlabel or bench.x_names[0])
    ax.set_ylabel(bench.ylabel)
    ax.set_title(bench.plot_name)
    if bench.x_log:
        ax.set_xscale("log")
    if bench.y_log:
        ax.set_yscale("log")
    ax.legend()
    if save_path:
        fig.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
    if show:
        plt.show()
    plt.close(fig)
