"""The on-disk compile cache (``runtime/cache.py``) through a disk-cacheable test backend:
round trip, corrupt entries, turning it off, and keys that follow what the code depends on."""
import json
import textwrap

import numpy as np
import pytest

import anytile as at
from anytile.runtime import cache
from anytile.runtime.discovery import register_backend, unregister_backend


@pytest.fixture
def cached_backend(plugin_path, tmp_path, monkeypatch):
    from numpy_source_backend import NumpySourceBackend

    class CachedSource(NumpySourceBackend):
        name = "cached-source"
        device_prefix = "cachedsrc"
        disk_cacheable = True

        def devices(self):
            return [at.backend.DeviceInfo("cachedsrc:0", 0, "numpy source, disk cached")]

    folder = tmp_path / "cache"
    monkeypatch.setenv("ANYTILE_CACHE_DIR", str(folder))
    monkeypatch.delenv("ANYTILE_NO_CACHE", raising=False)
    register_backend(CachedSource)
    yield folder
    unregister_backend("cached-source")


def _kernel_module(tmp_path, name, scale="2.0"):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(f"""
        import anytile as at, anytile.language as tl
        SCALE = tl.constexpr({scale})

        @at.jit
        def scaled(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE, mask=mask)
    """))
    namespace = {"__name__": name, "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["scaled"]


def _run(kernel):
    x = np.arange(8, dtype=np.float32)
    out = np.full(8, np.nan, np.float32)
    compiled = kernel[(1,)](x, out, 8, BLOCK=8, device="cachedsrc")
    return compiled, out


def test_a_second_process_loads_instead_of_compiling(cached_backend, tmp_path):
    first, out = _run(_kernel_module(tmp_path, "k1"))
    assert first.metadata.cache_hit_s is None
    (entry,) = cached_backend.glob("kernels/*/*.json")
    # a fresh JITFunction of the same source stands for the next process
    second, out2 = _run(_kernel_module(tmp_path, "k1"))
    assert second.metadata.cache_hit_s is not None
    assert second.asm == first.asm and second.signature == first.signature
    np.testing.assert_array_equal(out2, 2.0 * np.arange(8, dtype=np.float32))
    assert second.module is not None and second.asm["ir"].startswith("kernel @scaled")


def test_corrupt_or_foreign_entries_are_ignored_and_rewritten(cached_backend, tmp_path):
    _run(_kernel_module(tmp_path, "k2"))
    (entry,) = cached_backend.glob("kernels/*/*.json")
    for garbage in ("{not json", json.dumps({"format": 1, "key": "other"}), "",
                    json.dumps({"format": 1, "key": entry.stem, "asm": 5, "metadata": {}})):
        entry.write_text(garbage)
        compiled, out = _run(_kernel_module(tmp_path, "k2"))
        assert compiled.metadata.cache_hit_s is None
        np.testing.assert_array_equal(out, 2.0 * np.arange(8, dtype=np.float32))
        assert json.loads(entry.read_text())["key"] == entry.stem   # written over


def test_the_key_follows_module_level_constants(cached_backend, tmp_path):
    _, out = _run(_kernel_module(tmp_path, "k3", scale="2.0"))
    compiled, out = _run(_kernel_module(tmp_path, "k3", scale="3.0"))
    assert compiled.metadata.cache_hit_s is None
    np.testing.assert_array_equal(out, 3.0 * np.arange(8, dtype=np.float32))
    assert len(list(cached_backend.glob("kernels/*/*.json"))) == 2


@pytest.mark.parametrize("env", [{"ANYTILE_CACHE_DIR": ""}, {"ANYTILE_NO_CACHE": "1"}])
def test_the_cache_can_be_turned_off(cached_backend, tmp_path, monkeypatch, env):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cache.cache_dir() is None
    _run(_kernel_module(tmp_path, "k4"))
    compiled, _ = _run(_kernel_module(tmp_path, "k4"))
    assert compiled.metadata.cache_hit_s is None
    assert not list(cached_backend.glob("kernels/*/*.json"))


def test_unwritable_folders_and_odd_values_are_not_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert not cache.store_entry(blocker, "ab" * 32, {"ir": "x"}, {})
    assert not cache.store_entry(tmp_path, "ab" * 32, {"ir": object()}, {})
    assert not cache.store_entry(tmp_path, "ab" * 32, {"ir": "x"}, {"odd": object()})
    assert cache.load_entry(tmp_path, "cd" * 32) is None
    assert cache.store_entry(tmp_path, "ab" * 32, {"ir": "x", "bin": b"\0\1"}, {"n": 1})
    assert cache.load_entry(tmp_path, "ab" * 32) == ({"ir": "x", "bin": b"\0\1"}, {"n": 1})


def _factory_module(tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent("""
        import anytile as at, anytile.language as tl

        class Cfg:
            SCALE = 5.0

        def make(scale):
            S = tl.constexpr(scale)

            @at.jit
            def scaled(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                mask = offs < n
                tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * S, mask=mask)
            return scaled

        @at.jit
        def by_class(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * Cfg.SCALE, mask=mask)
    """))
    namespace = {"__name__": name, "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def test_closures_are_in_the_key_and_class_attributes_skip_the_cache(cached_backend, tmp_path):
    """A kernel made by a factory reads its closure (keyed); one reading a class attribute
    (which no key can follow) is compiled without the disk cache."""
    mod = _factory_module(tmp_path, "k5")
    for scale in (2.0, 3.0, 2.0):
        compiled, out = _run(mod["make"](scale))
        np.testing.assert_array_equal(out, scale * np.arange(8, dtype=np.float32))
    assert compiled.metadata.cache_hit_s is not None          # the second 2.0 came from disk
    compiled, out = _run(mod["by_class"])
    np.testing.assert_array_equal(out, 5.0 * np.arange(8, dtype=np.float32))
    mod["Cfg"].SCALE = 7.0
    compiled, out = _run(_factory_module(tmp_path, "k5")["by_class"])
    assert compiled.metadata.cache_hit_s is None
    np.testing.assert_array_equal(out, 5.0 * np.arange(8, dtype=np.float32))   # a new module: 5.0 again


def test_altered_or_truncated_entries_are_misses(cached_backend, tmp_path):
    """A well-formed entry whose code was edited (or cut short) fails its checksum: the kernel
    is compiled again, runs correctly, and the entry is written over."""
    _run(_kernel_module(tmp_path, "k6"))
    (entry,) = cached_backend.glob("kernels/*/*.json")
    good = entry.read_text()
    data = json.loads(good)
    data["asm"][0][1]["text"] = data["asm"][0][1]["text"].replace("mul", "add")   # the IR
    for damaged in (json.dumps(data), good[: len(good) // 2]):
        entry.write_text(damaged)
        compiled, out = _run(_kernel_module(tmp_path, "k6"))
        assert compiled.metadata.cache_hit_s is None
        np.testing.assert_array_equal(out, 2.0 * np.arange(8, dtype=np.float32))
        assert json.loads(entry.read_text())["asm"] == json.loads(good)["asm"]   # written over


def test_concurrent_writers_leave_one_whole_entry(tmp_path):
    """Many threads storing and loading one key: every load sees a whole entry or none."""
    import threading
    key = "ef" * 32
    payloads = [({"ir": f"kernel {i}", "bin": bytes([i]) * 4096}, {"n": i}) for i in range(8)]
    seen = []

    def work(i):
        for _ in range(20):
            cache.store_entry(tmp_path, key, *payloads[i])
            seen.append(cache.load_entry(tmp_path, key))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(hit in payloads for hit in seen if hit is not None) and any(seen)
    assert not list(tmp_path.glob("kernels/*/*.tmp"))
