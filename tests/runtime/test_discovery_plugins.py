"""Plugins that answer the contract with the wrong types, clash with another plugin or hang
at import: each is recorded with a reason that names it, and never breaks the others; and
``anytile backends``, which lists them in 100 columns."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.runtime import discovery

FAKES = '''
from anytile.backend import DeviceInfo, Target
from anytile.codegen.gpu.simulated_backend import SimulatedBackend
from anytile.interpreter import InterpreterBackend


class Good(InterpreterBackend):
    """The interpreter under another name: a plugin that follows the contract."""

    name = device_prefix = "good"

    def devices(self):
        return [DeviceInfo(f"{self.device_prefix}:0", 0, "a test plugin")]

    def target_of(self, device):
        return Target(self.name, "reference")


class NoneDevices(Good):
    name = device_prefix = "nonedevices"

    def devices(self):
        return None


class GarbageDevices(Good):
    name = device_prefix = "garbage"

    def devices(self):
        return ["garbage:0", 42]


class OthersDevices(Good):
    """Lists a device named as the interpreter's."""

    name = device_prefix = "others"

    def devices(self):
        return [DeviceInfo("interpreter:0", 0, "not mine")]


class BareTrue(Good):
    name = device_prefix = "baretrue"

    def availability(self):
        return True


class StringApi(Good):
    name = device_prefix = "stringapi"
    api_version = "1"


class Squatter(Good):
    """Names its devices as the interpreter's."""

    name = "squatter"
    device_prefix = "interpreter"


class GpuA(Good):
    name = "gpu-a"
    device_prefix = "gpu"


class GpuB(Good):
    name = "gpu-b"
    device_prefix = "gpu"


class TwinOne(Good):
    name = device_prefix = "twin"


class TwinTwo(Good):
    name = device_prefix = "twin"


class Instrument(SimulatedBackend):
    """A test instrument: usable only with ANYTILE_GPU_SIMULATOR=1 (never compiled for here)."""

    name = device_prefix = "instrument"

    def simulated_target(self):
        return None
'''

HANGS = '''
import os
import threading

open(os.environ["HANG_MARKER"], "w").close()
threading.Event().wait()     # never set: the import never finishes
'''

#: distribution -> its entry points (name = value)
BROKEN_AND_CLASHING = {
    "anytile-fake-plugins": {
        "good": "fakes:Good", "nonedevices": "fakes:NoneDevices", "garbage": "fakes:GarbageDevices",
        "others": "fakes:OthersDevices", "baretrue": "fakes:BareTrue", "stringapi": "fakes:StringApi",
        "squatter": "fakes:Squatter", "gpu-a": "fakes:GpuA", "gpu-b": "fakes:GpuB",
        "twin": "fakes:TwinOne",
    },
    "anytile-other-twin": {"twin": "fakes:TwinTwo"},
    "anytile-impostor": {"interpreter": "fakes:Good"},
}


def _install(site: Path, dists: dict[str, dict[str, str]]) -> None:
    """Each distribution as an installed dist-info with its entry points."""
    (site / "fakes.py").write_text(FAKES)
    (site / "hangs.py").write_text(HANGS)
    for dist, entry_points in dists.items():
        info = site / f"{dist.replace('-', '_')}-0.3.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3.0\n")
        lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
        (info / "entry_points.txt").write_text(f"[anytile.backends]\n{lines}")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site folder on sys.path and PYTHONPATH; ``install(dists)`` adds distributions and
    refreshes discovery (refreshed again after the test)."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("HANG_MARKER", str(tmp_path / "hang-imported"))
    monkeypatch.delenv("ANYTILE_DEVICE", raising=False)

    def install(dists):
        _install(folder, dists)
        discovery.discover(refresh=True)
        return folder

    yield install
    monkeypatch.undo()
    for module in ("fakes", "hangs"):
        sys.modules.pop(module, None)
    discovery.discover(refresh=True)


@at.jit
def _scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


def _runs_on(device) -> None:
    x = np.random.default_rng(3).standard_normal(100).astype(np.float32)
    out = np.full(100, np.nan, np.float32)
    if device is None:
        _scale[(1,)](x, out, 100, BLOCK=128)
    else:
        xd, od = at.asarray(x, device=device), at.asarray(out, device=device)
        _scale[(1,)](xd, od, 100, BLOCK=128)
        out = od.numpy()
    np.testing.assert_array_equal(out, x * np.float32(3.0))


def _reason(name: str) -> str:
    record = discovery.discover()[name]
    availability = record.availability
    assert not availability.usable, f"{name} should not be usable"
    assert not record.devices
    return availability.reason


def test_wrong_answers_to_the_contract_are_named(site):
    site(BROKEN_AND_CLASHING)
    assert "devices() returned None; it must return a list of anytile.backend.DeviceInfo" in \
        _reason("nonedevices")
    assert "devices() returned an item 'garbage:0' (a str)" in _reason("garbage")
    assert "device named 'interpreter:0' (a str) with index 0" in _reason("others")
    assert "availability() returned True (a bool)" in _reason("baretrue")
    assert "api_version is '1' (a str), not an int" in _reason("stringapi")


def test_one_broken_plugin_breaks_no_other_device(site):
    site(BROKEN_AND_CLASHING)
    names = [d.name for d in at.devices()]
    assert "interpreter:0" in names and "good:0" in names
    assert len(names) == len(set(names))
    _runs_on(at.device("good:0"))
    _runs_on(at.device("interpreter"))
    _runs_on(None)                  # the default device, chosen among all the plugins
    with pytest.raises(at.BackendError, match="availability\\(\\) returned True"):
        at.device("baretrue")


def test_a_device_prefix_that_is_another_backends_name_is_refused(site):
    site(BROKEN_AND_CLASHING)
    assert "device_prefix 'interpreter' is the name of the backend 'interpreter'" in \
        _reason("squatter")
    dev = at.device("interpreter:0")
    assert type(dev.backend).__name__ == "InterpreterBackend" and dev.backend.name == "interpreter"


def test_two_backends_with_one_device_prefix_are_both_refused(site):
    site(BROKEN_AND_CLASHING)
    a, b = _reason("gpu-a"), _reason("gpu-b")
    assert "also the device prefix of backend 'gpu-b' (fakes:GpuB from anytile-fake-plugins 0.3.0)" in a
    assert "also the device prefix of backend 'gpu-a'" in b
    with pytest.raises(at.BackendError, match="anytile cannot tell whose 'gpu:0' is meant"):
        at.device("gpu:0")


def test_two_distributions_naming_one_backend_are_both_refused(site):
    site(BROKEN_AND_CLASHING)
    reason = _reason("twin")
    assert "2 installed plugins are named 'twin'" in reason
    assert "fakes:TwinOne from anytile-fake-plugins 0.3.0" in reason
    assert "fakes:TwinTwo from anytile-other-twin 0.3.0" in reason
    with pytest.raises(at.BackendError, match="uninstall all but one"):
        at.device("twin")


def test_a_plugin_named_as_cores_interpreter_is_ignored_and_said(site):
    site(BROKEN_AND_CLASHING)
    record = discovery.discover()["interpreter"]
    assert type(record.backend).__name__ == "InterpreterBackend"
    assert any("fakes:Good from anytile-impostor 0.3.0: ignored" in n for n in record.notes)


def test_a_plugin_named_cpu_does_not_replace_the_cpu_backend(site):
    pytest.importorskip("anytile_cpu")
    site({"anytile-fake-cpu": {"cpu": "fakes:Good"}})
    reason = _reason("cpu")
    assert "fakes:Good from anytile-fake-cpu 0.3.0" in reason and "anytile-cpu" in reason
    with pytest.raises(at.BackendError, match="2 installed plugins are named 'cpu'"):
        at.device("cpu:0")


def test_listing_survives_every_broken_plugin(site):
    site(BROKEN_AND_CLASHING)
    done = subprocess.run([sys.executable, "-m", "anytile", "backends", "--all", "-v"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for name in ("nonedevices", "garbage", "others", "baretrue", "stringapi", "squatter",
                 "gpu-a", "gpu-b", "twin", "good:0", "interpreter:0"):
        assert name in done.stdout


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env})


def test_a_plugin_that_hangs_at_import_costs_nothing_to_a_process_not_asking_for_it(site,
                                                                                      tmp_path):
    site({"anytile-hangs": {"hangs": "hangs:Anything"}})
    # a generous limit: the old discovery imported every plugin up front and waited for it
    done = _python("""
        import anytile as at
        print(type(at.get_backend("interpreter")).__name__)
    """, ANYTILE_PLUGIN_TIMEOUT="5")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "InterpreterBackend"
    assert not (tmp_path / "hang-imported").exists()


@pytest.mark.parametrize("name", ["hangs", "a-hangs"])
def test_a_plugin_that_hangs_at_import_is_never_imported_by_launches_on_cpu(site, tmp_path, name):
    # "hangs" sorts after cpu: the default device is found before it; "a-hangs" sorts first,
    # so only launches that name their device are made (finding the default imports it)
    pytest.importorskip("anytile_cpu")
    site({"anytile-hangs": {name: "hangs:Anything"}})
    default = name == "hangs"
    script = tmp_path / "launch_on_cpu.py"          # kernels need a source file
    script.write_text(textwrap.dedent(f"""
        import numpy as np
        import anytile as at
        import anytile.language as tl

        @at.jit
        def add_one(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)

        cpu = at.device("cpu")
        x = np.random.default_rng(5).standard_normal(64).astype(np.float32)
        for _ in range(3):                  # the general path, then the fast path
            out = at.full(64, np.nan, np.float32, device="cpu:0")
            add_one[(1,)](out, at.asarray(x, device=cpu), 64, BLOCK=64)
            assert (out.numpy() == x + 1).all()
            host = np.full(64, np.nan, np.float32)
            add_one[(1,)](host, x, 64, BLOCK=64, device="cpu")
            assert (host == x + 1).all()
            if {default}:
                host = np.full(64, np.nan, np.float32)
                add_one[(1,)](host, x, 64, BLOCK=64)
                assert (host == x + 1).all()
                assert str(at.device()) == "cpu:0"
        print("launched")
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "ANYTILE_PLUGIN_TIMEOUT": "60",
                                            "ANYTILE_GPU_SIMULATOR": "0"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "launched"
    assert not (tmp_path / "hang-imported").exists()


def test_a_plugin_that_hangs_at_import_is_listed_with_why(site, tmp_path):
    site({"anytile-hangs": {"hangs": "hangs:Anything"}})
    done = subprocess.run([sys.executable, "-m", "anytile", "backends"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "ANYTILE_PLUGIN_TIMEOUT": "1"})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "hang-imported").exists()
    assert "importing hangs:Anything did not return within 1 s" in done.stdout.replace("\n", " ")


# -- anytile backends ---------------------------------------------------------------------------
def _backends(*args: str, **env: str) -> str:
    """``anytile backends ARGS`` with the test instruments switched off unless ``env`` says."""
    base = {k: v for k, v in os.environ.items() if k != "ANYTILE_GPU_SIMULATOR"}
    done = subprocess.run([sys.executable, "-m", "anytile", "backends", *args], capture_output=True,
                          text=True, timeout=300, env={**base, **env})
    assert done.returncode == 0 and not done.stderr, done.stderr
    return done.stdout


def test_backends_fits_100_columns_and_hides_test_instruments(site):
    site({"anytile-fake-plugins": {"good": "fakes:Good", "instrument": "fakes:Instrument",
                                   "nonedevices": "fakes:NoneDevices"}})
    plain = _backends()
    assert max(len(line) for line in plain.splitlines()) <= 100
    rows = {line.split()[0] for line in plain.splitlines() if line and not line[0].isspace()}
    assert {"good", "interpreter", "nonedevices"} <= rows and "instrument" not in rows
    assert "good:0  a test plugin" in plain
    assert "devices() returned None; it must return a list of anytile.backend.DeviceInfo" in \
        " ".join(plain.split())       # the reason, wrapped in its column
    assert "test instruments not listed (" in plain and "instrument" in plain.splitlines()[-1]
    every = _backends("--all")
    assert max(len(line) for line in every.splitlines()) <= 100
    assert any(line.startswith("instrument ") for line in every.splitlines())
    switched_on = _backends(ANYTILE_GPU_SIMULATOR="1")
    assert "instrument:0" in switched_on and "not listed" not in switched_on


def test_backends_verbose_gives_every_detail_in_100_columns(site):
    site({"anytile-fake-plugins": {"good": "fakes:Good", "instrument": "fakes:Instrument"}})
    text = _backends("-v", "--all")
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "entry point  fakes:Good from anytile-fake-plugins 0.3.0" in text
    assert "device       good:0 (a test plugin)" in text
    assert "a test instrument (a GPU lowering run on the host CPU)" in text


def test_backends_json_lists_every_plugin_and_marks_test_instruments(site):
    site({"anytile-fake-plugins": {"good": "fakes:Good", "instrument": "fakes:Instrument"}})
    rows = {row["name"]: row for row in json.loads(_backends("--json"))}
    assert rows["instrument"]["test_instrument"] and not rows["good"]["test_instrument"]
    assert rows["good"]["distribution"] == "anytile-fake-plugins 0.3.0"
    assert rows["good"]["devices"] == ["good:0 (a test plugin)"]


def test_help_is_plain_text():
    done = subprocess.run([sys.executable, "-m", "anytile", "--help"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0
    assert "``" not in done.stdout and ":func:" not in done.stdout
    assert "backends" in done.stdout


def test_a_closed_output_pipe_ends_the_listing_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)              # nobody will read: the first write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "anytile", "backends", "--json"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr


def test_ctrl_c_ends_a_command_with_one_line(monkeypatch, capsys):
    from anytile import cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_backends", interrupted)
    assert cli.main(["backends"]) == 130
    assert capsys.readouterr().err == "anytile: interrupted\n"


def test_ctrl_c_before_the_suite_runs_ends_with_one_line(monkeypatch, capsys):
    from anytile import cli

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_conformance", interrupted)
    assert cli.main(["conformance", "--list"]) == 130
    assert capsys.readouterr().err == "anytile: interrupted\n"
