"""The served ``triton`` module as programs inspect it: a real ``__file__`` (programs take its
folder), the public names of ``anytile.triton_compat`` kept by the package."""
import os
import subprocess
import sys

import pytest

import anytile.triton_compat as triton_compat


def _served(code: str) -> subprocess.CompletedProcess:
    """``code`` run in a fresh interpreter after ``install()``."""
    return subprocess.run([sys.executable, "-c", "import anytile.triton_compat as c\n"
                           "c.install('interpreter')\n" + code],
                          capture_output=True, text=True, timeout=300)


def test_the_served_triton_names_a_file_that_exists():
    proc = _served("import os, triton, triton.language\n"
                   "print(triton.__file__)\n"
                   "print(os.path.isdir(os.path.dirname(triton.__file__)))\n"
                   "print(triton.__spec__.origin == triton.__file__)\n")
    assert proc.returncode == 0, proc.stderr
    path, is_dir, same = proc.stdout.split()
    assert os.path.isfile(path) and (is_dir, same) == ("True", "True")
    assert os.path.samefile(path, triton_compat.__file__)


def test_the_package_keeps_its_public_names():
    for name in ("install", "uninstall", "run_path", "device_properties", "GPUTarget",
                 "NOT_PROVIDED_HINT", "reinterpret", "TensorWrapper", "triton_compile"):
        assert name in triton_compat.__all__ and hasattr(triton_compat, name), name
    assert triton_compat.StandInModule.__module__ == "anytile.triton_compat"


def test_a_child_without_the_chosen_device_says_why():
    """torch's compile workers, forked after CUDA was initialised, cannot use the device chosen
    for them (here: no NVIDIA driver at all), yet compile for it: its family's driver counts
    as active (torch asks before compiling: "Could not find an active GPU backend"), and
    anytile says once which device is unusable and why."""
    proc = _served("import os, triton, triton.backends\n"
                   "os.environ['ANYTILE_DEVICE'] = 'cuda:0'\n"
                   "active = [n for n, b in triton.backends.backends.items()\n"
                   "          if b.driver.is_active()]\n"
                   "print(active)\n"
                   "driver = triton.runtime.driver.active\n"     # torch reads it next
                   "assert type(driver).__name__ == 'CudaDriver', driver\n"
                   "os.environ['ANYTILE_DEVICE'] = 'cpu:0'\n"
                   "print([n for n, b in triton.backends.backends.items()\n"
                   "       if b.driver.is_active()])\n")
    assert proc.returncode == 0, proc.stderr
    with_cuda, with_cpu = proc.stdout.splitlines()
    assert "nvidia" in with_cuda and "nvidia" not in with_cpu    # this machine has no GPU
    lines = [line for line in proc.stderr.splitlines() if "chosen device cuda:0" in line]
    assert len(lines) == 1, proc.stderr          # once, though every family was asked
    assert "nvidia: " in lines[0] and "is not usable in this process" in lines[0]


def test_a_child_without_the_chosen_device_compiles_for_the_target_it_is_given(tmp_path):
    """What torch's compile workers do next: ``triton.compile(ASTSource(...), target)`` for
    the parent's target compiles ahead of time (PTX here, where no NVIDIA driver is), as a
    kernel of the chosen device; a target of another family is refused with the reason."""
    pytest.importorskip("anytile_nvidia")
    (tmp_path / "kern.py").write_text(
        "import triton\nimport triton.language as tl\n\n@triton.jit\n"
        "def add_one(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)\n")
    proc = _served("import os, sys\n"
                   f"sys.path.insert(0, {str(tmp_path)!r})\n"
                   "os.environ['ANYTILE_DEVICE'] = 'cuda:0'\n"
                   "import triton\nfrom triton.backends.compiler import GPUTarget\n"
                   "from triton.compiler import ASTSource\nimport kern\n"
                   "src = ASTSource(kern.add_one, {'x_ptr': '*fp32', 'n': 'i32', 'BLOCK': "
                   "'constexpr'}, {'BLOCK': 128}, {(0,): [['tt.divisibility', 16]]})\n"
                   "k = triton.compile(src, target=GPUTarget('cuda', 90, 32),\n"
                   "                   options={'num_warps': 4})\n"
                   "print(k.device, '.target sm_90' in k.asm['ptx'], k.metadata.num_warps)\n"
                   "try:\n"
                   "    triton.compile(src, target=GPUTarget('hip', 'gfx942', 64))\n"
                   "except Exception as exc:\n"
                   "    print(type(exc).__name__, exc)\n")
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()[:2]
    assert first == "cuda:0 True 4", proc.stdout
    assert "not usable in this process" in second, second
