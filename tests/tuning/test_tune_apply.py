"""``shmq tune apply``: dry run, real writes into a fake tree, persist files, root checks,
and (only as root where /proc/sys is writable) one real sysctl change, restored at once."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from shmq_cli.main import cli
from shmq_tuning import apply as apply_module
from shmq_tuning import profile
from shmq_tuning.apply import apply_fixes
from shmq_tuning.check import run_checks
from tune_tree import UNTUNED


@pytest.fixture
def as_root(monkeypatch):
    """Run ``apply`` as uid 0 (it only writes into the fake tree)."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)


def untuned(fake_root, **kw):
    return fake_root(sysctls=UNTUNED, nofile="1024", thp="[always] madvise never",
                     scheduler="[none] mq-deadline", **kw)  # fmt: skip


def tree_files(root):
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_dry_run_prints_changes_and_undo_and_writes_nothing(fake_root, store):
    root = untuned(fake_root)
    before = tree_files(root)
    args = ["tune", "apply", "--dry-run", "--root", str(root), "--store", str(store)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    out = result.output
    assert (
        "vm.swappiness: would write 10 to /proc/sys/vm/swappiness (now 60); "
        "undo: sysctl -w vm.swappiness=60" in out
    )
    assert "transparent_hugepage: would write madvise" in out
    assert "undo: echo always > /sys/kernel/mm/transparent_hugepage/enabled" in out
    assert "io scheduler (sdz): would write mq-deadline to /sys/block/sdz/queue/scheduler" in out
    assert "ulimit nofile: not changed (soft 1024, hard 1024)" in out
    assert "vm.dirty_background_ratio" not in out and "fs.file-max" not in out
    assert tree_files(root) == before


def test_dry_run_json_and_persist_preview(fake_root, store):
    root = untuned(fake_root)
    args = ["tune", "apply", "--dry-run", "--persist", "--root", str(root), "--store", str(store)]
    rows = json.loads(CliRunner().invoke(cli, [*args, "--json"]).output)
    assert {r["setting"] for r in rows} >= {"vm.swappiness", "ulimit nofile", "io scheduler (sdz)"}
    for row in rows:
        assert set(row) == {"setting", "current", "recommended", "status", "why"}
        assert row["status"] == "WARN"
    preview = CliRunner().invoke(cli, args).output
    assert "would write /etc/sysctl.d/99-shmq.conf:\n# written by" in preview
    assert "vm.swappiness = 10" in preview and "root soft nofile 655350" in preview
    assert not (root / "etc/sysctl.d").exists()


def test_apply_writes_the_tree_and_the_check_then_passes(fake_root, store, as_root):
    root = untuned(fake_root)
    result = CliRunner().invoke(cli, ["tune", "apply", "--root", str(root), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert (
        "vm.swappiness: 60 -> 10 (/proc/sys/vm/swappiness); undo: sysctl -w vm.swappiness=60"
        in result.output
    )
    assert (root / "proc/sys/vm/swappiness").read_text() == "10\n"
    assert (root / "proc/sys/vm/max_map_count").read_text() == "655360\n"
    assert (root / "proc/sys/vm/dirty_background_ratio").read_text() == "10\n"  # was OK: untouched
    assert (root / "sys/kernel/mm/transparent_hugepage/enabled").read_text() == "madvise\n"
    disk = root / "sys/devices/pci0000:00/block/sdz/queue/scheduler"
    assert disk.read_text() == "mq-deadline\n"
    assert not (root / "etc/sysctl.d").exists()
    rows = run_checks(profile.load("default"), str(root), str(store))
    assert [r.setting for r in rows if r.status != "OK"] == ["ulimit nofile"]


def test_persist_files(fake_root, store, as_root):
    root = untuned(fake_root, memlock="65536")
    limits = root / "etc/security/limits.d/99-shmq.conf"
    limits.parent.mkdir(parents=True)
    limits.write_text("someone else's file\n")
    args = ["tune", "apply", "--persist", "--root", str(root), "--store", str(store)]
    result = CliRunner().invoke(cli, [*args, "--profile", "low-latency"])
    assert result.exit_code == 0, result.output
    text = (root / "etc/sysctl.d/99-shmq.conf").read_text().splitlines()
    assert text[0].startswith("# written by `shmq tune apply --persist --profile low-latency`")
    assert text[1] == "# undo: rm /etc/sysctl.d/99-shmq.conf && sysctl --system"
    assert text[2:] == [
        "vm.max_map_count = 655360",
        "vm.swappiness = 1",
        "vm.dirty_background_ratio = 5",
        "vm.dirty_ratio = 50",
        "vm.min_free_kbytes = 320000",
    ]
    assert "* soft nofile 655350" in limits.read_text()
    assert "* hard memlock unlimited" in limits.read_text()
    assert (limits.parent / "99-shmq.conf.bak").read_text() == "someone else's file\n"
    assert "io scheduler (sdz): not persisted" in result.output
    assert "wrote /etc/sysctl.d/99-shmq.conf (5 settings)" in result.output


def test_low_latency_sets_a_haltpoll_guest_polling(fake_root, store, as_root):
    root = fake_root(cpuidle=("haltpoll", "0"))
    args = ["tune", "apply", "--persist", "--profile", "low-latency", "--root", str(root)]
    result = CliRunner().invoke(cli, [*args, "--store", str(store)])
    assert result.exit_code == 0, result.output
    poll = root / "sys/module/haltpoll/parameters/guest_halt_poll_ns"
    assert poll.read_text() == "200000\n"
    assert (
        "cpuidle guest_halt_poll_ns: 0 -> 200000 (/sys/module/haltpoll/parameters/"
        "guest_halt_poll_ns); undo: echo 0 > /sys/module/haltpoll/parameters/guest_halt_poll_ns"
    ) in result.output
    assert "cpuidle guest_halt_poll_ns: not persisted" in result.output
    rows = run_checks(profile.load("low-latency"), str(root), str(store))
    assert {r.setting: r.status for r in rows}["cpuidle guest_halt_poll_ns"] == "OK"


def test_nothing_to_change(fake_root, store, as_root):
    root = fake_root()
    result = CliRunner().invoke(cli, ["tune", "apply", "--root", str(root), "--store", str(store)])
    assert result.exit_code == 0
    assert result.output.startswith("nothing to change: the host matches profile 'default'")


def test_apply_needs_root(fake_root, store, monkeypatch):
    root = untuned(fake_root)
    before = tree_files(root)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    args = ["tune", "apply", "--root", str(root), "--store", str(store)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert result.output.startswith("error: shmq tune apply changes kernel settings and needs root")
    assert "--dry-run" in result.output and len(result.output.strip().splitlines()) == 1
    assert CliRunner().invoke(cli, [*args, "--dry-run"]).exit_code == 0
    assert tree_files(root) == before


def test_failed_write_is_an_error(fake_root, store, as_root, monkeypatch):
    root = untuned(fake_root)
    real_open = open

    def read_only_swappiness(path, mode="r", *args, **kw):
        if "w" in mode and str(path).endswith("vm/swappiness"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, mode, *args, **kw)

    monkeypatch.setattr(apply_module, "open", read_only_swappiness, raising=False)
    result = CliRunner().invoke(cli, ["tune", "apply", "--root", str(root), "--store", str(store)])
    assert result.exit_code == 1
    assert "vm.swappiness: cannot write /proc/sys/vm/swappiness" in result.output
    assert "error: 1 changes failed; first: vm.swappiness" in result.output
    assert (root / "proc/sys/vm/max_map_count").read_text() == "655360\n"  # the others went on


def _sysctl_writable(path: str) -> str | None:
    """None if ``path`` can be written here, else why not (writing its own value back)."""
    if os.geteuid() != 0:
        return "not root"
    try:
        with open(path) as f:
            value = f.read()
        with open(path, "w") as f:
            f.write(value)
    except OSError as exc:
        return f"{path} is not writable here: {exc.strerror}"
    return None


def test_real_apply_of_one_sysctl_is_restored():
    """The one test that changes the real host: vm.swappiness, put back in ``finally``."""
    path = "/proc/sys/vm/swappiness"
    reason = _sysctl_writable(path)
    if reason:
        pytest.skip(reason)
    rows = [r for r in run_checks(profile.load("default")) if r.setting == "vm.swappiness"]
    if rows[0].fix is None:
        pytest.skip(f"vm.swappiness is already {rows[0].current}: nothing to change")
    old = rows[0].current
    try:
        result = apply_fixes(rows, "/", dry_run=False, persist=False, profile="default")
        assert result.errors == []
        with open(path) as f:
            assert f.read().strip() == "10"
    finally:
        with open(path, "w") as f:
            f.write(old)
    with open(path) as f:
        assert f.read().strip() == old
