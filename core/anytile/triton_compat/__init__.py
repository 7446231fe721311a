"""Run a program written for Triton, unmodified, on any anytile device.

    anytile run --as-triton [--device cpu] prog.py [ARGS ...]        # from the shell

    import anytile.triton_compat
    anytile.triton_compat.install(device="cpu")                      # from Python, before
    import triton                                                    # the program's imports

``install()`` puts an import hook first on ``sys.meta_path`` that serves ``import triton``
and its public submodules from anytile.  Only Triton's public names are served, each by its
anytile counterpart (same behaviour, Triton's spelling):

=================================  ===========================================================
``triton``                         ``jit``, ``autotune``, ``heuristics``, ``Config``, ``cdiv``,
                                   ``next_power_of_2``, ``knobs``, ``TritonError``,
                                   ``CompilationError``, ``OutOfResources``, ``__version__``
``triton.language`` (``tl``)       ``anytile.language``, with ``.extra``, ``.extra.cuda``,
                                   ``.extra.hip``, ``.extra.libdevice``, ``.math``,
                                   ``.random``, ``.core``
``triton.testing``                 ``do_bench``, ``do_bench_cudagraph`` (timed as ``do_bench``),
                                   ``assert_close``, ``perf_report``, ``Benchmark``
``triton.runtime``                 ``driver`` (``active``, ``default``, ``set_active``,
                                   ``reset_active``); ``driver.active``:
                                   ``get_active_torch_device()``,
                                   ``get_current_device()``, ``get_current_target()``,
                                   ``utils.get_device_properties(index)``; ``Autotuner``,
                                   ``Heuristics``, ``Config``, ``JITFunction``, ``KernelInterface``,
                                   ``errors.OutOfResources``
``triton.compiler``                ``compile(ASTSource(fn, signature, constexprs, attrs),
                                   target, options)``, ``CompiledKernel`` (``run``, Triton's
                                   launcher), ``make_backend``, ``compiler.triton_key``,
                                   ``errors.CompilationError``
``triton.backends``                ``backends`` (``nvidia``/``amd`` where anytile has that
                                   backend installed, ``cpu`` always: host devices), each
                                   ``Backend(compiler, driver)``; ``compiler.GPUTarget``,
                                   ``BaseBackend``; ``driver.DriverBase``, ``GPUDriver``: what
                                   torch's inductor reads (``torch.compile``, ``torch._dynamo``)
``triton.tools.tensor_descriptor`` ``TensorDescriptor`` (``at.TensorDescriptor``)
``triton.tools.experimental_descr  ``create_1d/2d_tma_descriptor``, ``TmaDescKernelParam`` (and
iptor``                            ``driver.active.utils.fill_1d/2d_tma_descriptor``): Triton
                                   3.2-3.3's host-filled descriptors, read at launch as
                                   ``at.TensorDescriptor`` arguments (``runtime/host_descriptors``)
``triton.profiler`` (``.viewer``)  ``start``, ``activate``, ``deactivate``, ``scope``,
                                   ``finalize``, ``viewer.parse``/``print_tree``: proton's
                                   API over anytile's launch hooks (``anytile.proton``)
``triton._C.libtriton``            ``nvidia.cublas.CublasLt`` only (Triton's private cuBLAS
                                   binding, the reference of its tutorials 09 and 10), by
                                   torch's matrix products
=================================  ===========================================================

Anything else (the rest of ``triton.tools`` and ``triton._C``, Triton's internal IR) is not
provided: reading it raises ``AttributeError`` (``ImportError`` for a module) whose message
says that anytile does not provide it.  With ``ANYTILE_TRITON_SOURCE``
set to the ``python`` folder of a Triton checkout, a module the hook does not serve is loaded
from that checkout's file when there is one (its own test helpers, such as
``triton._internal_testing``, which then run on anytile).  The device is ``device=`` (the
``--device`` flag), else ``ANYTILE_DEVICE``, else anytile's default device; torch tensors the
program makes on ``get_active_torch_device()`` live on ``cuda:N`` for NVIDIA and AMD devices
and on the CPU for host devices (cpu, interpreter, OpenCL on the CPU).  ``install()`` also
makes the Python interpreters the program starts (``multiprocessing`` spawn and forkserver
workers, torch's compile workers) serve ``import triton`` the same way.

The package, by what each part serves: ``hook`` (the finder first on ``sys.meta_path``,
``install``, ``uninstall``), ``modules`` (the module tree: each ``triton.*`` name and what
builds it), ``standin`` (the stand-in module class), ``drivers`` (targets, device properties,
``triton.runtime.driver`` and ``triton.backends.driver``), ``compiler`` (``triton.compile``,
``ASTSource``, ``CompiledKernel``, ``triton.backends.compiler``: what torch's inductor uses),
``knobs``, ``reinterpret`` (``triton.reinterpret``), ``tools`` (``triton._C.libtriton``'s cuBLAS,
``triton.tools.experimental_descriptor``), ``children`` (child interpreters) and ``run`` (what
``anytile run --as-triton`` does).  ``triton.__file__`` names this file.
"""
from __future__ import annotations

from .children import CHILD_ENV
from .compiler import (ASTSource, BaseBackend, CompiledKernel, make_backend, triton_compile,
                       triton_key)
from .drivers import (TRITON_BACKEND_NAMES, CPUDriver, CudaDriver, DriverBase, GPUDriver, GPUTarget,
                      HIPDriver, device_properties)
from .hook import install, uninstall
from .reinterpret import TYPE_CANONICAL, TensorWrapper, reinterpret
from .run import run_path
from .standin import NOT_PROVIDED_HINT, TRITON_VERSION, StandInModule

__all__ = ["install", "uninstall", "run_path", "device_properties", "GPUTarget",
           "NOT_PROVIDED_HINT", "TRITON_VERSION", "TRITON_BACKEND_NAMES", "CHILD_ENV",
           "ASTSource", "CompiledKernel", "triton_compile", "make_backend", "triton_key",
           "BaseBackend", "DriverBase", "GPUDriver", "CudaDriver", "HIPDriver", "CPUDriver",
           "TYPE_CANONICAL", "TensorWrapper", "reinterpret", "StandInModule"]
