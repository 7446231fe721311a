"""``torch.compile`` beside anytile: torch's inductor writes Triton kernels for a small model
(forward and backward), and anytile compiles and runs them (``anytile run --as-triton``), on
every device inductor can target: host devices through ``cpu_backend = "triton"`` (torch
tensors on the CPU), NVIDIA through torch CUDA.  Each run is checked against the same model
in float64 (eager), and the kernels are checked to be anytile's."""
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

PROGRAM = '''
import torch
import triton
import anytile as at

device = triton.runtime.driver.active.get_active_torch_device()
if device.type == "cpu":
    import torch._inductor.config
    torch._inductor.config.cpu_backend = "triton"      # inductor writes Triton for the CPU too

compiled, launched = [], []
at.knobs.compilation.listener = lambda info: compiled.append(info.name)
at.knobs.runtime.launch_enter_hook = lambda info: launched.append(info.name)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(48)
        self.up = torch.nn.Linear(48, 96)
        self.down = torch.nn.Linear(96, 48)

    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        return (x + h).softmax(-1) * 3.0 - x.mean()


torch.manual_seed(7)
model = Block().to(device)
x = torch.randn(4, 10, 48, device=device, requires_grad=True)
out = torch.compile(model)(x)
out.square().sum().backward()

exact = Block().double()
exact.load_state_dict(model.state_dict())
x64 = x.detach().cpu().double().requires_grad_(True)
want = exact(x64)
want.square().sum().backward()
errors = [(out.detach().cpu().double() - want.detach()).abs().max().item(),
          (x.grad.cpu().double() - x64.grad).abs().max().item(),
          max((p.grad.cpu().double() - q.grad).abs().max().item()
              for p, q in zip(model.parameters(), exact.parameters()))]
ours = sorted({n for n in launched if n.startswith("triton_")})
print("kernels", len(ours), "errors", " ".join(f"{e:.1e}" for e in errors))
assert ours and set(ours) <= set(compiled), (ours, compiled)
assert errors[0] < 1e-4 and max(errors[1:]) < 1e-3, errors
'''


def _inductor_reaches(name: str) -> str:
    """Why inductor cannot target the device ``name``, or ''."""
    import anytile as at
    dev = at.device(name)
    if not dev.backend.triton_backend:
        return ""
    if dev.backend.triton_backend == "cuda" and torch.cuda.is_available():
        return ""
    return f"inductor puts {name}'s tensors on torch CUDA, which is not available here"


@pytest.mark.parametrize("name", ["cpu:0", "interpreter:0", "opencl:0", "cuda:0"])
def test_torch_compile_runs_inductors_kernels_on_anytile(tmp_path, name):
    import anytile as at
    if name not in [d.name for d in at.devices()]:
        pytest.skip(f"{name} is not usable here")
    why = _inductor_reaches(name)
    if why:
        pytest.skip(why)
    prog = tmp_path / "model.py"
    prog.write_text(textwrap.dedent(PROGRAM))
    proc = subprocess.run([sys.executable, "-m", "anytile", "run", "--as-triton", "--device",
                           name, str(prog)], capture_output=True, text=True, timeout=1200,
                          cwd=tmp_path)
    ours = "\n".join(sorted({line for line in proc.stderr.splitlines()
                              if line.startswith("anytile: ")}))    # e.g. a worker's device
    assert proc.returncode == 0, ours + "\n" + proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.startswith("kernels "), proc.stdout
