"""shmq's numba kernel cache: out of the package, keyed by the sources, complete after one
warm-up (``shmq.kernel_cache``, ``shmq.codec.kernel_locator``, ``shmq.broker.kernels``)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
import textwrap

import pytest
from numba.core.registry import CPUDispatcher

import shmq
from shmq import kernel_cache
from shmq.codec.kernel_locator import KernelLocator


def _kernel_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(shmq.__path__, "shmq."):
        if info.name.startswith("shmq.spark.autoregister"):
            continue
        spec = importlib.util.find_spec(info.name)
        if spec and spec.origin and spec.origin.endswith(".py"):
            with open(spec.origin, encoding="utf-8") as f:
                if "@njit" in f.read():
                    names.append(info.name)
    return names


def test_every_kernel_is_cached_by_shmqs_locator_outside_the_package():
    modules = _kernel_modules()
    assert "shmq.codec.record" in modules and "shmq.store.dispatch.run" in modules
    checked = 0
    for name in modules:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, CPUDispatcher) and value.__module__ == name:
                if not value._cache._impl.__class__.__name__.startswith("CompileResult"):
                    continue
                locator = value._cache._impl.locator
                assert isinstance(locator, KernelLocator), (name, value)
                assert locator.get_source_stamp() == kernel_cache.fingerprint()
                path = locator.get_cache_path()
                assert path.startswith(kernel_cache.sources_dir())
                assert not path.startswith(kernel_cache.PACKAGE_DIR)
                checked += 1
    assert checked > 30


def test_kernel_dir_follows_the_environment(monkeypatch, tmp_path):
    for key in ("SHMQ_CACHE_DIR", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kernel_cache.kernel_dir() == str(tmp_path / ".cache" / "shmq" / "kernels")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.kernel_dir() == str(tmp_path / "xdg" / "shmq" / "kernels")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))  # [tuning] numba_cache_dir
    assert kernel_cache.kernel_dir() == str(tmp_path / "numba" / "shmq")
    monkeypatch.setenv("SHMQ_CACHE_DIR", str(tmp_path / "own"))
    assert kernel_cache.kernel_dir() == str(tmp_path / "own" / "kernels")


def test_kernels_of_other_sources_are_kept_apart_and_pruned(monkeypatch, tmp_path):
    """Two installs of different sources keep a folder each (they would overwrite each
    other's kernels at every start); completing a warm-up removes the folders of sources
    beyond the most recently completed ones."""
    monkeypatch.setenv("SHMQ_CACHE_DIR", str(tmp_path))
    root = tmp_path / "kernels"
    old = []
    for i in range(kernel_cache.KEEP_SOURCES + 2):
        folder = root / f"other{i}"
        folder.mkdir(parents=True)
        os.utime(folder, (1000 + i, 1000 + i))
        old.append(folder)
    assert not kernel_cache.is_warm()
    kernel_cache.mark_warm()
    assert kernel_cache.is_warm()
    assert kernel_cache.sources_dir().startswith(str(root))
    kept = sorted(p.name for p in root.iterdir())
    newest = [f.name for f in old[-kernel_cache.KEEP_SOURCES :]]
    assert kept == sorted([*newest, os.path.basename(kernel_cache.sources_dir())])


def _package(root, files: dict[str, str]) -> str:
    pkg = root / "shmq"
    for rel, text in files.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return str(pkg)


KERNEL = """
    from numba import njit

    from shmq.limits import LIMIT


    @njit(cache=True)
    def f(x):
        return x + LIMIT
"""


def test_the_fingerprint_covers_kernels_and_what_they_import_not_the_rest(tmp_path):
    files = {"__init__.py": "", "codec/__init__.py": "", "codec/k.py": KERNEL,
             "limits.py": "LIMIT = 1\n", "client.py": "X = 1\n"}  # fmt: skip

    def fingerprint(name: str, **changed: str) -> str:
        changes = {k.replace("__", "/") + ".py": v for k, v in changed.items()}
        return kernel_cache.package_fingerprint(_package(tmp_path / name, {**files, **changes}))

    first = fingerprint("a")
    assert fingerprint("b") == first  # the same sources elsewhere: the same cache
    assert fingerprint("c", client="X = 2\n") == first  # a module no kernel imports
    assert fingerprint("d", limits="LIMIT = 2\n") != first  # a constant a kernel froze in
    assert fingerprint("e", codec__k=KERNEL + "\n") != first


@pytest.mark.slow
def test_one_warm_up_compiles_every_kernel_the_broker_and_its_clients_use(tmp_path):
    """After ``compile_kernels`` in an empty cache, a broker with a producer, a consumer, a
    TCP send and pull compiles nothing more (numba writes nothing new into the cache)."""
    script = textwrap.dedent("""
        import sys
        from shmq import kernel_cache
        from shmq.broker.kernels import compile_kernels

        if __name__ == "__main__":
            assert not kernel_cache.is_warm()
            assert compile_kernels()
            assert kernel_cache.is_warm() and not compile_kernels()
    """)
    use = textwrap.dedent("""
        import shmq

        if __name__ == "__main__":
            with shmq.EmbeddedBroker(topics={"T": 2}) as mq:
                for transport in ("shm", "tcp"):
                    with shmq.Producer("p-" + transport, mq.namesrv, transport=transport) as p:
                        p.send(shmq.Message("T", b"x", tags="a", keys=["k"]))
                        p.send_batch([shmq.Message("T", b"y")] * 3)
                        p.send_bulk("T", [b"z"] * 10)
                    with shmq.PullConsumer("c-" + transport, mq.namesrv, transport=transport,
                                           consume_from_where="FIRST_OFFSET") as c:
                        c.subscribe("T", "a || b")
                        c.start()
                        got = 0
                        for _ in range(100):
                            got += len(c.poll(timeout=0.2))
                            if got:
                                break
                        assert got, transport
    """)
    env = {**os.environ, "SHMQ_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_CACHE_DIR", None)
    for code in (script, use):
        path = tmp_path / "run.py"
        path.write_text(code)
        before = _cached_files(tmp_path / "cache")
        run = subprocess.run([sys.executable, str(path)], env=env, capture_output=True,
                             text=True, timeout=600)  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
    after = _cached_files(tmp_path / "cache")
    assert after == before, f"compiled after the warm-up: {sorted(after - before)}"


def _cached_files(root) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, n), root)
        for d, _, names in os.walk(root)
        for n in names
        if n.endswith((".nbi", ".nbc"))
    }
