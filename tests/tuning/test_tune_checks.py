"""``shmq tune check`` against a fake /proc and /sys tree: each kind of check, and the CLI."""

from __future__ import annotations

import json
import os
import tempfile
import tomllib

import pytest
from click.testing import CliRunner

from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.config.tuning import TuningConfig
from shmq.errors import ConfigError
from shmq_cli.main import cli
from shmq_tuning import profile
from shmq_tuning.check import run_checks
from shmq_tuning.shm import required_bytes
from tune_tree import UNTUNED


def by_name(rows):
    return {r.setting: r for r in rows}


def test_tuned_host_is_all_ok(fake_root, store):
    rows = run_checks(profile.load("default"), str(fake_root()), str(store))
    bad = [r for r in rows if r.status != "OK"]
    assert bad == []
    names = [r.setting for r in rows]
    for name in ("vm.max_map_count", "vm.swappiness", "vm.dirty_background_ratio",
                 "vm.dirty_ratio", "vm.min_free_kbytes", "vm.overcommit_memory",
                 "fs.file-max", "ulimit nofile", "ulimit memlock", "transparent_hugepage",
                 "io scheduler (sdz)", "/dev/shm size", "runtime.gc_freeze",
                 "runtime.cpu_affinity", "runtime.pythonmalloc"):  # fmt: skip
        assert name in names


def test_untuned_host_warns_with_fixes(fake_root, store):
    root = fake_root(sysctls=UNTUNED, nofile="1024", thp="[always] madvise never",
                     scheduler="[none] mq-deadline")  # fmt: skip
    rows = by_name(run_checks(profile.load("default"), str(root), str(store)))
    assert rows["vm.swappiness"].status == "WARN"
    assert rows["vm.swappiness"].fix.path == "/proc/sys/vm/swappiness"
    assert rows["vm.swappiness"].fix.value == "10"
    assert rows["vm.swappiness"].fix.undo == "sysctl -w vm.swappiness=60"
    assert rows["vm.max_map_count"].fix.value == "655360"
    # 1 % of the fake 16,000,000 kB of RAM, capped at the profile's 1,000,000.
    assert rows["vm.min_free_kbytes"].recommended == ">= 160000 (1 % of RAM)"
    assert rows["vm.min_free_kbytes"].fix.value == "160000"
    assert rows["vm.dirty_background_ratio"].status == "OK"
    assert rows["ulimit nofile"].status == "WARN" and not rows["ulimit nofile"].fix.path
    assert rows["ulimit nofile"].current == "soft 1024, hard 1024"
    assert rows["transparent_hugepage"].current == "always"
    assert rows["transparent_hugepage"].fix.value == "madvise"
    sched = rows["io scheduler (sdz)"]
    assert (sched.status, sched.current) == ("WARN", "none")
    assert sched.fix.path == "/sys/block/sdz/queue/scheduler" and sched.fix.value == "mq-deadline"


def test_values_above_a_minimum_are_never_lowered(fake_root, store):
    rows = by_name(run_checks(profile.load("default"), str(fake_root()), str(store)))
    assert rows["fs.file-max"].status == "OK" and rows["fs.file-max"].fix is None


def test_overcommit_two_warns_and_dirty_bytes_take_precedence(fake_root, store):
    sysctls = {**UNTUNED, "vm/overcommit_memory": "2", "vm/dirty_ratio": "0",
               "vm/dirty_bytes": "1073741824"}  # fmt: skip
    rows = by_name(run_checks(profile.load("default"), str(fake_root(sysctls=sysctls)), str(store)))
    assert rows["vm.overcommit_memory"].status == "WARN"
    assert rows["vm.overcommit_memory"].fix.value == "1"
    assert rows["vm.dirty_ratio"].status == "OK"
    assert "vm.dirty_bytes = 1073741824" in rows["vm.dirty_ratio"].current


@pytest.mark.parametrize("layout", ["partition", "whole", "dm"])
def test_scheduler_follows_partitions_and_device_mapper(fake_root, store, layout):
    rows = run_checks(profile.load("default"), str(fake_root(layout=layout)), str(store))
    sched = [r for r in rows if r.setting.startswith("io scheduler")]
    assert [(r.setting, r.current, r.status) for r in sched] == [
        ("io scheduler (sdz)", "mq-deadline", "OK")
    ]


def test_scheduler_none_is_fine_on_a_non_rotational_disk(fake_root, store):
    root = fake_root(scheduler="[none] mq-deadline", rotational="0")
    (row,) = [r for r in run_checks(profile.load("default"), str(root), str(store))
              if r.setting.startswith("io scheduler")]  # fmt: skip
    assert row.status == "OK" and "not rotational" in row.recommended


def test_scheduler_is_na_where_there_is_no_block_device(fake_root):
    if not os.path.isdir("/dev/shm") or os.major(os.stat("/dev/shm").st_dev) != 0:
        pytest.skip("needs /dev/shm on tmpfs (device major 0)")
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="shmq-tune-test-") as shm_store:
        rows = run_checks(profile.load("default"), str(fake_root()), shm_store + "/new/store")
    (row,) = [r for r in rows if r.setting.startswith("io scheduler")]
    assert (row.current, row.status) == ("n/a", "OK")
    assert "without a block device" in row.why


def test_scheduler_is_na_without_sysfs_entry(fake_root, store):
    root = fake_root()
    for link in (root / "sys/dev/block").iterdir():
        link.unlink()
    (row,) = [r for r in run_checks(profile.load("default"), str(root), str(store))
              if r.setting.startswith("io scheduler")]  # fmt: skip
    assert row.current == "n/a" and "no /sys/dev/block/" in row.why


def test_dev_shm_against_the_configured_rings(fake_root, store):
    small = BrokerConfig()
    assert required_bytes(small) > small.max_producers * small.ring_size
    huge = BrokerConfig().replace(max_producers=4096, ring_size=1 << 30)
    root = str(fake_root())
    ok = by_name(run_checks(profile.load("default"), root, str(store), small))["/dev/shm size"]
    warn = by_name(run_checks(profile.load("default"), root, str(store), huge))["/dev/shm size"]
    assert ok.status == "OK" and "64 producer rings" in ok.why
    assert warn.status == "WARN" and "4096 producer rings" in warn.why
    assert "mount -o remount,size=" in warn.why


def test_memlock_matters_only_when_mapped_files_are_warmed(fake_root, store):
    root = str(fake_root(memlock="65536"))
    default = by_name(run_checks(profile.load("default"), root, str(store)))
    assert default["ulimit memlock"].status == "OK"
    low = by_name(run_checks(profile.load("low-latency"), root, str(store)))
    assert low["ulimit memlock"].status == "WARN"
    assert str(2 << 30) in low["ulimit memlock"].recommended


def test_runtime_rows_follow_the_config(fake_root, store):
    root = str(fake_root())
    low = profile.load("low-latency")
    plain = by_name(run_checks(low, root, str(store), BrokerConfig()))
    assert plain["runtime.gc_threshold"].status == "WARN"
    assert "set [tuning] gc_threshold = [10000, 50, 50]" in plain["runtime.gc_threshold"].why
    assert plain["runtime.numba_threading_layer"].status == "WARN"
    tuned_cfg = BrokerConfig().replace(tuning=low.runtime.to_mapping())
    tuned = by_name(run_checks(low, root, str(store), tuned_cfg))
    assert all(r.status == "OK" for k, r in tuned.items() if k.startswith("runtime."))
    outside = BrokerConfig().replace(tuning={"cpu_affinity": {"writer": [4096]}})
    row = by_name(run_checks(low, root, str(store), outside))["runtime.cpu_affinity"]
    assert row.status == "WARN" and "[4096] are not allowed" in row.why


def test_runtime_rows_see_the_environment(fake_root, store, monkeypatch, tmp_path):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("PYTHONMALLOC", "pymalloc_debug")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    rows = by_name(run_checks(profile.load("default"), str(fake_root()), str(store)))
    assert rows["runtime.pythonmalloc"].status == "WARN"
    assert rows["runtime.numba_cache_dir"].status == "WARN"


def test_profiles_are_data_and_the_default_runtime_is_the_broker_default():
    assert profile.available() == ["default", "low-latency"]
    assert profile.load("default").runtime == TuningConfig()
    low = profile.load("low-latency")
    assert low.runtime.cpu_affinity == "auto" and low.runtime.pretouch_mapped_files
    with pytest.raises(ConfigError, match="unknown tuning profile 'fast'"):
        profile.load("fast")
    with pytest.raises(ConfigError, match="malformed"):
        profile.parse("broken", {"sysctl": {}})


def test_low_latency_asks_a_haltpoll_guest_to_poll_before_it_halts(fake_root, store):
    name = "cpuidle guest_halt_poll_ns"
    low = profile.load("low-latency")
    assert low.halt_poll_ns == 200_000 and profile.load("default").halt_poll_ns is None
    root = str(fake_root(cpuidle=("haltpoll", "0")))
    rows = by_name(run_checks(low, root, str(store)))
    row = rows[name]
    assert (row.status, row.current, row.recommended) == ("WARN", "0", ">= 200000")
    assert row.fix.path == "/sys/module/haltpoll/parameters/guest_halt_poll_ns"
    assert (row.fix.value, row.fix.undo) == ("200000", f"echo 0 > {row.fix.path}")
    assert "kernel command line" in row.why
    # the default profile does not ask for it: polling costs host CPU
    assert name not in by_name(run_checks(profile.load("default"), root, str(store)))


@pytest.mark.parametrize(
    "cpuidle, status, current",
    [(("haltpoll", "500000"), "OK", "500000"), (("haltpoll", "200000"), "OK", "200000"),
     (("acpi_idle", None), "OK", "n/a"), (("haltpoll", None), "OK", "n/a"), (None, "OK", "n/a")],
)  # fmt: skip
def test_halt_poll_is_ok_at_or_above_it_and_na_off_a_haltpoll_guest(
    tmp_path, store, cpuidle, status, current
):
    from tune_tree import build

    root = build(tmp_path / "root", store, cpuidle=cpuidle)
    row = by_name(run_checks(profile.load("low-latency"), str(root), str(store)))
    row = row["cpuidle guest_halt_poll_ns"]
    assert (row.status, row.current, row.fix) == (status, current, None)


def test_a_profile_with_a_negative_halt_poll_is_malformed():
    data = tomllib.loads((profile.PROFILE_DIR / "low-latency.toml").read_text())
    data["cpuidle"] = {"guest_halt_poll_ns": -1}
    with pytest.raises(ConfigError, match="guest_halt_poll_ns must be >= 0"):
        profile.parse("broken", data)


def test_cli_check_json_shape(fake_root, store):
    root = fake_root(sysctls=UNTUNED)
    result = CliRunner().invoke(
        cli, ["tune", "check", "--root", str(root), "--store", str(store), "--json"]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert isinstance(rows, list) and len(rows) > 15
    for row in rows:
        assert set(row) == {"setting", "current", "recommended", "status", "why"}
        assert row["status"] in ("OK", "WARN") and all(isinstance(v, str) for v in row.values())
    swappiness = next(r for r in rows if r["setting"] == "vm.swappiness")
    assert swappiness["current"] == "60" and swappiness["recommended"] == "<= 10"
    assert swappiness["status"] == "WARN"


def test_cli_check_table_and_config(fake_root, store, tmp_path):
    conf = tmp_path / "broker.toml"
    conf.write_text('[tuning]\ngc_threshold = [10000, 50, 50]\ncpu_affinity = "auto"\n')
    args = ["tune", "check", "--root", str(fake_root()), "--store", str(store), "-c", str(conf)]
    result = CliRunner().invoke(cli, [*args, "--profile", "low-latency"])
    assert result.exit_code == 0, result.output
    assert "runtime.gc_threshold" in result.output and "WARN" in result.output
    assert result.output.strip().splitlines()[-1].endswith("shows the kernel changes")


def test_cli_check_fits_an_80_column_terminal(fake_root, store):
    args = ["tune", "check", "--root", str(fake_root(sysctls=UNTUNED)), "--store", str(store)]
    narrow = CliRunner(env={"COLUMNS": "80"})
    result = narrow.invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    why = [line for line in lines if line.startswith("WARN vm.swappiness: ")]
    assert why and "swapped-out page" in result.output
    assert not any(line.startswith("OK ") for line in lines)
    verbose = narrow.invoke(cli, [*args, "--verbose"]).output.splitlines()
    assert any(line.startswith("OK ") for line in verbose)
    assert max(len(line) for line in verbose) <= 80


def test_cli_bad_input(fake_root, store, tmp_path):
    base = ["tune", "check", "--root", str(fake_root()), "--store", str(store)]
    unknown = CliRunner().invoke(cli, [*base, "--profile", "fast"])
    assert unknown.exit_code == 2 and "Invalid value for '--profile'" in unknown.output
    missing = CliRunner().invoke(cli, ["tune", "check", "--root", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "--root" in missing.output
    conf = tmp_path / "bad.toml"
    conf.write_text("[tuning]\ngc_treshold = [1, 2, 3]\n")
    bad = CliRunner().invoke(cli, [*base, "-c", str(conf)])
    assert bad.exit_code == 1
    assert bad.output.startswith("error: unknown [tuning] key 'gc_treshold'")
    assert len(bad.output.strip().splitlines()) == 1


def test_tune_help_is_light():
    """Listing the tune commands imports neither numpy nor numba (shmq_cli.main's rule)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from shmq_cli.main import cli\n"
        "for args in (['tune', '--help'], ['tune', 'check', '--help']):\n"
        "    r = CliRunner().invoke(cli, args)\n"
        "    assert r.exit_code == 0 and 'low-latency' in r.output or args[1:] == ['--help']\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'numpy')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
