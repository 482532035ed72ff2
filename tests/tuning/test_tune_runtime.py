"""The broker's ``[tuning]`` table: parsing, and its application in a process (always in a
subprocess, so this test process keeps its own GC, affinity and environment)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest

from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.config.tuning import TuningConfig, environment, prepare_tuning, resolve_affinity
from shmq.errors import ConfigError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(code: str, timeout: float = 120) -> dict:
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=timeout, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_from_mapping_converts_and_rejects():
    t = TuningConfig.from_mapping({"gc-threshold": "1000, 20, 30", "gc_freeze": "false",
                                   "cpu_affinity": {"writer": [1], "reput": ["0"]},
                                   "malloc_trim_threshold": "1048576"})  # fmt: skip
    assert t.gc_threshold == (1000, 20, 30) and t.gc_freeze is False
    assert t.malloc_trim_threshold == 1 << 20 and t.malloc_mmap_threshold == 16 << 20
    assert t.cpu_affinity == {"writer": (1,), "reput": (0,)}
    assert TuningConfig.from_mapping(t.to_mapping()) == t
    for bad, match in (
        ({"gc_treshold": [1, 2, 3]}, "unknown \\[tuning\\] key 'gc_treshold'"),
        ({"gc_threshold": [1, 2]}, "three integers"),
        ({"gc_freeze": "maybe"}, "gc_freeze = 'maybe' is not valid"),
        ({"cpu_affinity": "all"}, "must be '', 'auto' or a table"),
        ({"cpu_affinity": {"writter": [0]}}, "unknown role 'writter'"),
        ({"cpu_affinity": {"writer": []}}, "must be CPU numbers"),
        ({"numba_threading_layer": "fast"}, "numba_threading_layer 'fast'"),
        ({"pythonmalloc": "jemalloc"}, "pythonmalloc 'jemalloc'"),
        ({"malloc_mmap_threshold": -1}, "malloc_mmap_threshold -1 must be bytes"),
        ({"malloc_trim_threshold": "lots"}, "malloc_trim_threshold = 'lots' is not valid"),
        ({"malloc_trim_threshold": 1 << 31}, "must be bytes in"),
    ):
        with pytest.raises(ConfigError, match=match):
            TuningConfig.from_mapping(bad)


def test_auto_affinity_gives_the_writer_a_core_of_its_own():
    assert resolve_affinity("auto", {0, 1, 2, 3}) == {
        "writer": (3,), "reput": (0, 1, 2), "flush": (0, 1, 2), "supervisor": (0, 1, 2)
    }  # fmt: skip
    assert resolve_affinity("auto", {5}) == {}
    assert resolve_affinity("", {0, 1}) == {}
    assert TuningConfig(cpu_affinity={"flush": (2,)}).affinity_for("writer", {0, 1, 2}) == ()


def test_prepare_folds_tuning_into_the_agents_config():
    cfg = BrokerConfig().replace(tuning={"cpu_affinity": "auto", "pretouch_mapped_files": True})
    folded, tuning = prepare_tuning(cfg)
    assert folded.store.warm_mapped_file_enable and not cfg.store.warm_mapped_file_enable
    assert TuningConfig.from_mapping(folded.tuning) == tuning
    assert tuning.cpu_affinity == resolve_affinity("auto")  # explicit: restarts agree
    plain, default = prepare_tuning(BrokerConfig())
    assert default == TuningConfig() and not plain.store.warm_mapped_file_enable
    with pytest.raises(ConfigError):
        prepare_tuning(BrokerConfig().replace(tuning={"x": 1}))


def test_environment_holds_only_what_is_set():
    assert environment(TuningConfig()) == {}
    t = TuningConfig(numba_cache_dir="/tmp/nc", numba_threading_layer="workqueue",
                     pythonmalloc="malloc")  # fmt: skip
    assert environment(t) == {"NUMBA_CACHE_DIR": "/tmp/nc", "NUMBA_THREADING_LAYER": "workqueue",
                              "PYTHONMALLOC": "malloc"}  # fmt: skip


def test_apply_runtime_in_a_process():
    cpu = max(os.sched_getaffinity(0))
    result = run_python(f"""
        import gc, json, mmap, os, resource
        from shmq.broker.config.tuning import TuningConfig, apply_runtime

        def rss_shmem_kb():
            for line in open("/proc/self/status"):
                if line.startswith("RssShmem:"):
                    return int(line.split()[1])

        size = 8 << 20
        mm = mmap.mmap(-1, size)  # shared anonymous: counted as RssShmem once touched
        before = rss_shmem_kb()
        t = TuningConfig(gc_threshold=(1234, 11, 12), cpu_affinity={{"writer": [{cpu}]}})
        lines = apply_runtime(t, "writer", [mm])
        print(json.dumps({{
            "lines": lines,
            "touched_kb": rss_shmem_kb() - before,
            "frozen": gc.get_freeze_count(),
            "threshold": gc.get_threshold(),
            "affinity": sorted(os.sched_getaffinity(0)),
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
            "bytes": mm[:16].hex(),
        }}))
    """)
    assert result["touched_kb"] >= (8 << 10) * 0.9, result
    assert result["bytes"] == "00" * 16  # pre-touch changes nothing
    assert result["frozen"] > 1000
    assert result["threshold"] == [1234, 11, 12]
    assert result["affinity"] == [cpu]
    soft, hard = result["nofile"]
    assert soft == hard
    assert any(line.startswith("pretouch: 1 mappings, 8388608 bytes") for line in result["lines"])
    assert "malloc thresholds: mmap 16777216, trim 67108864" in result["lines"]  # glibc took both


def test_affinity_outside_the_allowed_cpus_is_reported_not_raised():
    result = run_python("""
        import json, os
        from shmq.broker.config.tuning import TuningConfig, apply_runtime
        before = sorted(os.sched_getaffinity(0))
        t = TuningConfig(cpu_affinity={"reput": [4095]}, gc_freeze=False)
        lines = apply_runtime(t, "reput")
        print(json.dumps({"lines": lines, "same": sorted(os.sched_getaffinity(0)) == before}))
    """)
    assert result["same"]
    assert any("cpu affinity [4095] not set" in line for line in result["lines"])


def test_broker_applies_its_tuning_in_every_process(tmp_path):
    """A real broker (in a subprocess): the writer is pinned and its GC thresholds set by
    ``run_agent``, the supervisor froze its GC, and a new producer's ring is pre-touched."""
    cpu = max(os.sched_getaffinity(0))
    store = tmp_path / "store"
    result = run_python(
        f"""
        import gc, json, os
        from shmq.broker.config.broker_config import BrokerConfig
        from shmq.broker.supervisor import Broker
        from shmq.ipc import counters as cn

        cfg = BrokerConfig().replace(
            listen_port=0, store_path_root_dir={str(store)!r},
            mapped_file_size_commit_log=1 << 20, ring_size=1 << 20, ring_slots=1024,
            tuning={{"cpu_affinity": {{"writer": [{cpu}]}}, "gc_threshold": [5000, 10, 10]}},
        )
        broker = Broker(cfg)
        broker.start()
        try:
            pid = int(cn.load(broker.counters.words, cn.agent_word("writer", cn.PID)))
            writer = sorted(os.sched_getaffinity(pid))
            slot = broker.clients.register_producer(os.getpid(), "tuning-test")
            ring = "/dev/shm" + slot.segment.name
            rss = 0
            lines = open("/proc/self/smaps").read().splitlines()
            for i, line in enumerate(lines):
                if line.endswith(ring):
                    rss = next(int(x.split()[1]) for x in lines[i + 1:] if x.startswith("Rss:"))
            print(json.dumps({{
                "writer": writer, "frozen": gc.get_freeze_count(),
                "threshold": gc.get_threshold(), "ring_kb": rss,
                "ring_size_kb": slot.segment.size // 1024,
            }}))
        finally:
            broker.stop()
    """,
        timeout=240,
    )
    assert result["writer"] == [cpu]
    assert result["frozen"] > 1000 and result["threshold"] == [5000, 10, 10]
    assert result["ring_kb"] >= result["ring_size_kb"] * 0.9, result


def test_every_profile_spells_out_every_runtime_key():
    """A profile's [runtime] table is what users copy into [tuning]: it lists every key."""
    import tomllib

    from shmq_tuning import profile

    names = {f.name for f in dataclasses.fields(TuningConfig)}
    for name in profile.available():
        data = tomllib.loads((profile.PROFILE_DIR / f"{name}.toml").read_text())
        assert set(data["runtime"]) == names, name
