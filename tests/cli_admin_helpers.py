"""What the ``shmq admin`` CLI tests share: a namesrv and broker of their own, and running a
command through click's runner against it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from click.testing import CliRunner, Result

from e2e_helpers import cluster, shm_entries
from shmq_cli.main import cli


@contextlib.contextmanager
def admin_cluster(directory: Path) -> Iterator:
    """A namesrv and a broker (two queues per topic) in ``directory``; on leaving, none of the
    broker's own segments (named after its pid) is left (other runs may hold theirs)."""
    before = shm_entries()
    with cluster(directory, defaultTopicQueueNums=2) as running:
        pid = running.main.proc.pid
        yield running
    assert {e for e in shm_entries() - before if f"shmq-{pid}-" in e} == set()


def admin(c, *args: str, ok: bool = True) -> Result:
    """``shmq admin ARGS -n NAMESRV``; with ``ok``, require exit status 0."""
    result = CliRunner().invoke(cli, ["admin", *args, "-n", c.namesrv])
    if ok:
        assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


def admin_json(c, *args: str):
    return json.loads(admin(c, *args, "--json").stdout)
