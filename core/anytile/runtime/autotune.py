"""``anytile.autotune``, ``anytile.heuristics`` and ``anytile.Config``, with Triton's meaning.

``@autotune(configs, key)`` wraps a ``@jit`` kernel (or another wrapper): the first launch
with a new *tuning key* (the values of the arguments named in ``key``, and the dtype of every
array argument) times each config with ``do_bench`` on the launch's device and keeps the
fastest; later launches with that key use it.  ``prune_configs_by`` (``early_config_prune``,
``perf_model`` with ``top_k``) narrows the configs first; ``reset_to_zero`` arguments are zeroed
before every timed run and ``restore_value`` arguments are saved before tuning and restored
after, so tuning never changes what the launch computes; ``pre_hook``/``post_hook`` run around
every timed run.  With ``cache_results=True`` (or ``ANYTILE_CACHE_AUTOTUNING=1``) choices are
kept on disk beside the compile cache, keyed by the kernel's source, the device, the tuning
key and the *set* of configs (reordering the list keeps the choice).

``@heuristics({"BLOCK": lambda args: ...})`` computes meta-parameters from the arguments."""
from __future__ import annotations

import builtins
import functools
import hashlib
import json
import os
import warnings
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import AnytileError, LaunchArgumentError, LaunchValueError, user_facing
from . import cache
from .bench import do_bench
from .dependencies import scan
from .devices import default_device

__all__ = ["Config", "Autotuner", "autotune", "Heuristics", "heuristics", "KernelInterface"]


class Config:
    """One choice of meta-parameters (``kwargs``) and launch options for an autotuned kernel."""

    def __init__(self, kwargs: dict[str, Any], num_warps: int = 4, num_stages: int = 3,
                 num_ctas: int = 1, maxnreg: Optional[int] = None,
                 pre_hook: Optional[Callable[[dict], Any]] = None) -> None:
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict[str, Any]:
        """The meta-parameters and the launch options, as a launch takes them."""
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.num_ctas != 1:
            options["num_ctas"] = self.num_ctas
        if self.maxnreg is not None:
            options["maxnreg"] = self.maxnreg
        return {**self.kwargs, **options}

    def __str__(self) -> str:
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_ctas: {self.num_ctas}",
                  f"num_stages: {self.num_stages}", f"maxnreg: {self.maxnreg}"]
        return ", ".join(parts)

    __repr__ = __str__

    def _identity(self) -> str:
        """What makes two configs the same choice (stable across processes)."""
        return json.dumps([sorted((k, repr(v)) for k, v in self.kwargs.items()), self.num_warps,
                           self.num_stages, self.num_ctas, self.maxnreg])


class KernelInterface:
    """What ``kernel[grid](*args, **kwargs)`` needs: a ``run(*args, grid=..., **kwargs)``."""

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.run, grid=grid)

    def warmup(self, *args: Any, grid: Any = (1,), **kwargs: Any) -> Any:
        raise AnytileError("warmup of an autotuned or heuristic kernel is not supported; "
                           "call warmup on the @jit kernel with a config's values")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"'{self.__name__}' is an anytile kernel: launch it with a grid, "
                           f"{self.__name__}[grid](...)")


def _launch(fn: Any, grid: Any, args: tuple, kwargs: dict) -> Any:
    """Launch the wrapped ``fn``: a ``@jit`` kernel through its fast path (``kernel[grid]``:
    a repeated launch costs microseconds, not the general path's tens), a wrapper by its
    ``run``."""
    fast = getattr(fn, "_fast", None)
    if fast is not None:
        return fast(grid, *args, **kwargs)
    return fn.run(*args, grid=grid, **kwargs)


def _base_kernel(fn: Any) -> Any:
    while not hasattr(fn, "launch_signature"):
        fn = fn.fn
    return fn


def _where(fn: Any) -> str:
    """``'name' (file:line)``: the kernel as errors about its wrappers name it."""
    base = _base_kernel(fn)
    return f"'{base.__name__}' ({base.file}:{base.first_line})"


def _computed_names(fn: Any) -> set[str]:
    """The meta-parameters ``@heuristics`` wrappers between ``fn`` and its kernel compute."""
    names: set[str] = set()
    while not hasattr(fn, "launch_signature"):
        names |= set(getattr(fn, "values", {}))
        fn = fn.fn
    return names


class Autotuner(KernelInterface):
    """A kernel launched with the fastest of ``configs`` for each tuning key."""

    def __init__(self, fn: Any, configs: Sequence[Config], key: Sequence[str],
                 reset_to_zero: Optional[Sequence[str]] = None,
                 restore_value: Optional[Sequence[str]] = None,
                 pre_hook: Optional[Callable[..., Any]] = None,
                 post_hook: Optional[Callable[..., Any]] = None,
                 prune_configs_by: Optional[dict[str, Any]] = None,
                 warmup: Optional[float] = None, rep: Optional[float] = None,
                 do_bench: Optional[Callable[..., float]] = None,
                 cache_results: bool = False) -> None:
        self.fn = fn
        self.arg_names = list(fn.arg_names)
        self.__name__ = fn.__name__
        if isinstance(key, str) or not all(isinstance(k, str) for k in key):
            raise LaunchArgumentError(f"@autotune of {_where(fn)}: key must be a list of "
                                      f"parameter names, got {key!r}")
        for index, config in enumerate(configs):
            if not isinstance(config, Config):
                raise LaunchArgumentError(f"@autotune of {_where(fn)}: configs[{index}] is a "
                                          f"{type(config).__name__}, not an at.Config (write "
                                          f"at.Config({config!r}))")
        # Triton's meaning of configs=[]: one config setting nothing, the launch passes all
        self.configs = list(configs) or [Config({})]
        self._tuned_names = frozenset(k for c in self.configs for k in c.kwargs)
        base = _base_kernel(fn)
        self._required = [n for n in base.arg_names if n not in base.defaults and
                          n not in _computed_names(fn)]
        self.keys = list(key)
        stray = [name for name in self.keys if name not in self.arg_names]
        if stray:       # Triton leaves them out of the key; say so once, then do the same
            warnings.warn(f"@autotune of '{fn.__name__}': key {stray} names no parameter of the "
                          f"kernel ({', '.join(self.arg_names)}); it is left out of the tuning "
                          f"key", stacklevel=3)
        unknown = [name for name in [*(reset_to_zero or ()), *(restore_value or ())]
                   if name not in self.arg_names]
        if unknown:
            raise LaunchArgumentError(f"@autotune of '{fn.__name__}': {unknown} are not "
                                      f"parameters of the kernel ({', '.join(self.arg_names)})")
        self.reset_to_zero = list(reset_to_zero or ())
        self.restore_value = list(restore_value or ())
        self.user_pre_hook, self.user_post_hook = pre_hook, post_hook
        prune = prune_configs_by or {}
        self.early_config_prune = prune.get("early_config_prune")
        self.perf_model = prune.get("perf_model")
        self.top_k = prune.get("top_k", 1.0)
        self.warmup_ms = 25 if warmup is None else warmup
        self.rep_ms = 100 if rep is None else rep
        self.bench = do_bench
        self.cache_results = cache_results or os.environ.get("ANYTILE_CACHE_AUTOTUNING") == "1"
        self.cache: dict[tuple, Config] = {}
        self.best_config: Optional[Config] = None
        self.configs_timings: Optional[dict[Config, Any]] = None
        self._failures: dict[Config, str] = {}     # why a config could not be timed

    # -- the tuning key -------------------------------------------------------------------------
    def _tuning_key(self, named: dict[str, Any]) -> tuple:
        key: list[Any] = [_hashable(named[k]) for k in self.keys if k in named]
        # the dtype objects themselves (NumPy's and torch's hash and compare by value, and
        # print the same in every process): ``str`` of a NumPy dtype costs microseconds
        key += [_hashable(v.dtype) for v in named.values() if hasattr(v, "dtype") and
                not isinstance(v, (int, float, bool, np.generic))]
        return tuple(key)

    # -- launching ----------------------------------------------------------------------------
    @user_facing
    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Launch with the tuned config for these arguments (tuning first if it is new)."""
        if kwargs and not self._tuned_names.isdisjoint(kwargs):
            clash = sorted(self._tuned_names.intersection(kwargs))
            raise LaunchArgumentError(f"'{self.__name__}' is autotuned over {clash}; "
                                      f"do not pass them to the launch")
        named = dict(zip(self.arg_names, args))
        if kwargs:
            named.update({k: v for k, v in kwargs.items() if k in self.arg_names})
        if len(self.configs) > 1:
            key = self._tuning_key(named)
            config = self.cache.get(key)
            if config is None:
                config = self._stored_choice(key, named)
            if config is None:
                config = self._tune(key, args, named, grid, kwargs)
        else:
            config = self.configs[0]
            self._check_values(config, args, kwargs)
        self.best_config = config
        chosen = config.all_kwargs()
        if config.pre_hook is not None:
            config.pre_hook({**named, **kwargs, **chosen})
        return _launch(self.fn, grid, args, {**kwargs, **chosen})

    def _check_values(self, config: Config, args: tuple, kwargs: dict) -> None:
        """Raise when ``config`` and the launch leave a parameter of the kernel without a
        value (a config missing a constexpr, or misspelling it)."""
        given = set(self.arg_names[:len(args)]) | set(kwargs) | set(config.kwargs)
        unset = [name for name in self._required if name not in given]
        if not unset:
            return
        if not config.kwargs and len(self.configs) == 1:
            where = "configs=[] sets nothing"
        else:
            index = next(i for i, c in enumerate(self.configs) if c is config)
            sets = ", ".join(f"{k}: {v!r}" for k, v in config.kwargs.items())
            where = (f"configs[{index}] ({{{sets}}}) does not set "
                     f"{'it' if len(unset) == 1 else 'them'}")
        stray = sorted(set(config.kwargs) - set(self.arg_names))
        raise LaunchArgumentError(
            f"autotuning {_where(self.fn)}: no value for {', '.join(map(repr, unset))}: the "
            f"launch does not pass {'it' if len(unset) == 1 else 'them'} and {where}"
            + (f" ({', '.join(map(repr, stray))}: no parameter of the kernel)" if stray else "")
            + "; pass it to the launch or set it in every config")

    def _tune(self, key: tuple, args: tuple, named: dict, grid: Any, kwargs: dict) -> Config:
        pruned = self.prune_configs(kwargs, named)
        for config in pruned:
            self._check_values(config, args, kwargs)
        saved = {name: _snapshot(named[name]) for name in self.restore_value}
        try:
            timings = {config: self._time(config, args, named, grid, kwargs) for config in pruned}
        finally:
            for name, copy in saved.items():
                _restore(named[name], copy)
        best = builtins.min(timings, key=lambda c: _first(timings[c]))
        if _first(timings[best]) == float("inf"):
            first = self._failures.get(pruned[0], "") if pruned else ""
            raise AnytileError(f"autotuning {_where(self.fn)}: every config failed to compile "
                               f"or run for {key}" + (f"; the first, {pruned[0]}, with: {first}"
                                                      if first else ""))
        self.cache[key] = best
        self.configs_timings = timings
        self._store_choice(key, named, best)
        for name in self.reset_to_zero:        # the timed runs wrote there: start clean
            _zero(named[name])
        return best

    def _time(self, config: Config, args: tuple, named: dict, grid: Any, kwargs: dict) -> Any:
        current = {**kwargs, **config.all_kwargs()}
        full = {**named, **current}

        def call() -> None:
            if config.pre_hook is not None:
                config.pre_hook(full)
            for name in self.reset_to_zero:
                _zero(named[name])
            if self.user_pre_hook is not None:
                self.user_pre_hook(full)
            try:
                _launch(self.fn, grid, args, current)
            except Exception as exc:
                if self.user_post_hook is not None:
                    self.user_post_hook(full, exception=exc)
                raise
            if self.user_post_hook is not None:
                self.user_post_hook(full, exception=None)
        try:
            if self.bench is not None:
                return self.bench(call, quantiles=(0.5, 0.2, 0.8))
            return do_bench(call, warmup=self.warmup_ms, rep=self.rep_ms, quantiles=(0.5, 0.2, 0.8))
        except AnytileError as exc:    # a config that does not compile or fit: never chosen
            self._failures[config] = str(exc)
            return [float("inf")] * 3

    def prune_configs(self, kwargs: dict, named: Optional[dict] = None) -> list[Config]:
        """The configs left after ``early_config_prune`` and the ``perf_model``'s ``top_k``."""
        named = named or {}
        configs = self.configs
        if self.early_config_prune is not None:
            configs = list(self.early_config_prune(configs, named, **kwargs))
            if not configs:
                raise LaunchValueError(f"autotuning {_where(self.fn)}: early_config_prune kept "
                                       f"none of the {len(self.configs)} configs; it must "
                                       f"return at least one")
        if self.perf_model is not None:
            top_k = self.top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = builtins.max(1, int(len(configs) * top_k))
            if not isinstance(top_k, int) or top_k < 1:
                raise LaunchValueError(f"autotuning {_where(self.fn)}: prune_configs_by's "
                                       f"top_k must be a positive int or a fraction in (0, 1], "
                                       f"got {self.top_k!r}")
            estimates = {c: self.perf_model(**named, **kwargs, **c.all_kwargs()) for c in configs}
            configs = sorted(configs, key=lambda c: estimates[c])[:top_k]
        return list(configs)

    # -- choices on disk ------------------------------------------------------------------------
    def _choice_path(self, key: tuple, named: dict) -> Optional[str]:
        folder = cache.cache_dir()
        if not self.cache_results or folder is None:
            return None
        base = _base_kernel(self.fn)
        device = _launch_device(named)
        parts = [scan(base).portable_key, device, repr(key),
                 *sorted(c._identity() for c in self.configs)]
        digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()
        return os.path.join(folder, "autotune", f"{base.__name__}-{digest[:32]}.json")

    def _stored_choice(self, key: tuple, named: dict) -> Optional[Config]:
        path = self._choice_path(key, named)
        if path is None:
            return None
        try:
            with open(path, encoding="utf-8") as f:
                identity = json.load(f)["config"]
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None                 # unreadable or damaged: tuned again and written over
        for config in self.configs:
            if config._identity() == identity:
                self.cache[key] = config
                return config
        return None

    def _store_choice(self, key: tuple, named: dict, config: Config) -> None:
        path = self._choice_path(key, named)
        if path is None:
            return
        text = json.dumps({"key": repr(key), "config": config._identity(), "str": str(config)})
        cache.write_atomically(path, text)     # a choice is only an optimisation: no error


def autotune(configs: Sequence[Config], key: Sequence[str], prune_configs_by: Optional[dict] = None,
             reset_to_zero: Optional[Sequence[str]] = None,
             restore_value: Optional[Sequence[str]] = None,
             pre_hook: Optional[Callable[..., Any]] = None,
             post_hook: Optional[Callable[..., Any]] = None,
             warmup: Optional[float] = None, rep: Optional[float] = None,
             use_cuda_graph: bool = False, do_bench: Optional[Callable[..., float]] = None,
             cache_results: bool = False) -> Callable[[Any], Autotuner]:
    """Decorate a ``@jit`` kernel (see the module docstring).  ``use_cuda_graph`` is accepted
    and ignored (runs are timed one by one)."""
    def decorator(fn: Any) -> Autotuner:
        return Autotuner(fn, configs, key, reset_to_zero, restore_value, pre_hook, post_hook,
                         prune_configs_by, warmup, rep, do_bench, cache_results)
    return decorator


class Heuristics(KernelInterface):
    """A kernel whose meta-parameters ``values`` are computed from its arguments."""

    def __init__(self, fn: Any, values: dict[str, Callable[[dict], Any]]) -> None:
        self.fn = fn
        self.values = dict(values)
        self.arg_names = list(fn.arg_names)
        self.__name__ = fn.__name__

    @user_facing
    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Launch with the meta-parameters computed from these arguments."""
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        for name, rule in self.values.items():
            kwargs[name] = named[name] = rule(named)
        return _launch(self.fn, grid, args, kwargs)


def heuristics(values: dict[str, Callable[[dict], Any]]) -> Callable[[Any], Heuristics]:
    """Decorate a kernel: each ``values[name](args_by_name)`` gives meta-parameter ``name``."""
    return lambda fn: Heuristics(fn, values)


# -- arguments: snapshots, zeroing, keys ---------------------------------------------------------
def _first(timing: Any) -> float:
    return timing[0] if isinstance(timing, (list, tuple)) else timing


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def _launch_device(named: dict) -> str:
    for value in named.values():
        device = getattr(value, "device", None)
        if device is not None and not isinstance(value, (int, float, bool)):
            return str(device)
    return default_device().name


def _snapshot(value: Any) -> Any:
    """A copy of an array argument's contents (anytile, NumPy or torch-like)."""
    if hasattr(value, "clone"):
        return value.clone()
    if hasattr(value, "numpy") and hasattr(value, "copy_from"):
        return value.numpy()
    return np.array(value, copy=True)


def _restore(value: Any, copy: Any) -> None:
    if hasattr(value, "copy_"):
        value.copy_(copy)
    elif hasattr(value, "copy_from"):
        value.copy_from(copy)
    else:
        value[...] = copy


def _zero(value: Any) -> None:
    if hasattr(value, "zero_"):
        value.zero_()
    elif hasattr(value, "copy_from"):
        value.copy_from(np.zeros(value.shape, value.dtype))
    else:
        value[...] = 0
