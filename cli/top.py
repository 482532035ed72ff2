"""``shmq top`` (and ``shmq status --watch``): a live view of one running broker.

Every ``--interval`` it takes a snapshot of the broker (``shmq.client.broker_sampler``: the
requests ``shmq status`` and ``shmq admin`` make, so it works the same against a broker on
this host or on another one) and turns successive snapshots into rates: the broker's own
counters give no per-topic rate finer than RocketMQ's 10 s stats windows.

On a terminal the view is redrawn in place (``rich.live``); to a pipe or a file each
snapshot is printed once, plain, so scripts and tests read the same numbers.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any

import click

from shmq.client.broker_sampler import RATE_WINDOW_S, BrokerSampler, Snapshot
from shmq.config import DEFAULT_STORE_ROOT
from shmq.errors import ShmqError
from shmq_cli.connection import client_options, connection_options


def _rate(new: float, old: float | None, seconds: float) -> str:
    """A per-second rate as a cell; ``-`` until two snapshots (or a value that went back:
    an offset reset)."""
    if old is None or seconds <= 0 or new < old:
        return "-"
    return f"{(new - old) / seconds:,.1f}"


def render(history: collections.deque[Snapshot]) -> Any:
    """The view of the newest snapshot, rates against the oldest one kept."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from shmq_cli.feedback import human_bytes

    new, old = history[-1], history[0] if len(history) > 1 else None
    span = new.at - old.at if old is not None else 0.0
    rt = new.runtime
    disk = f"{new.disk_ratio:.1%}" if new.disk_ratio is not None else "?"
    title = Text.assemble(
        ("broker ", ""), (rt["broker"], "bold"), f" {rt.get('broker_role', 'ASYNC_MASTER')}",
        f" at {rt['address']}, store {rt['store']} (disk {disk} used), {rt['flush_disk_type']}",
        f"; rates over {span:.1f} s" if old is not None else "",
    )  # fmt: skip

    def was(key: str) -> float | None:
        return old.runtime[key] if old is not None else None

    broker = Table("in msg/s", "dispatched msg/s", "out msg/s", "flush behind",
                   "dispatch behind", "rejected", title="broker", title_justify="left")  # fmt: skip
    broker.add_row(
        _rate(rt["msgs_in"], was("msgs_in"), span),
        _rate(rt["msgs_dispatched"], was("msgs_dispatched"), span),
        _rate(rt["msgs_out"], was("msgs_out"), span),
        human_bytes(max(rt["write_offset"] - rt["flushed_offset"], 0)),
        human_bytes(max(rt["write_offset"] - rt["dispatched_offset"], 0)),
        str(rt["rejected"]),
    )
    topics = Table("topic", "queues", "messages", "in msg/s", "out msg/s", title="topics",
                   title_justify="left")  # fmt: skip
    for topic, (queues, stored) in new.topics.items():
        before = old.topics.get(topic) if old is not None else None
        done = sum(c for (_, t), (_, c) in new.groups.items() if t == topic)
        done_before = None
        if old is not None:
            done_before = sum(c for (_, t), (_, c) in old.groups.items() if t == topic)
        topics.add_row(topic, str(queues), f"{stored:,}",
                       _rate(stored, before[1] if before else None, span),
                       _rate(done, done_before, span))  # fmt: skip
    groups = Table("group", "topic", "lag", "consumed msg/s", title="consumer groups",
                   title_justify="left")  # fmt: skip
    for (group, topic), (lag, committed) in sorted(new.groups.items()):
        before = old.groups.get((group, topic)) if old is not None else None
        groups.add_row(group, topic, f"{lag:,}",
                       _rate(committed, before[1] if before else None, span))  # fmt: skip
    agents = Table("process", "pid", "alive", "restarts", "CPU %", title="agents",
                   title_justify="left")  # fmt: skip
    procs = [("supervisor", {"pid": rt["pid"], "alive": True, "restarts": ""})]
    for kind, agent in rt.get("agents", {}).items():
        procs.append((kind, agent))
    for kind, agent in procs:
        cpu = "?"
        if kind in new.cpu and old is not None and kind in old.cpu and span > 0:
            cpu = f"{100 * (new.cpu[kind] - old.cpu[kind]) / span:.0f}"
        agents.add_row(kind, str(agent.get("pid", "")), "yes" if agent.get("alive") else "NO",
                       str(agent.get("restarts", "")), cpu)  # fmt: skip
    rings = [c for c in rt.get("clients", []) if c.get("kind") == "producer"]
    fenced = sum(1 for c in rings if c.get("fenced"))
    used = sum(int(c.get("used_bytes") or 0) for c in rings)
    size = sum(int(c.get("ring_bytes") or 0) for c in rings)
    ring_line = Text(f"producer rings: {len(rings)}, {human_bytes(used)} of {human_bytes(size)}"
                     f" unread, {fenced} fenced", style="bold red" if fenced else "")  # fmt: skip
    parts: list[Any] = [title, broker, topics, groups, agents, ring_line]
    slaves = new.ha.get("slaves")
    if slaves:
        ha = Table("slave", "acked offset", "lag", "lag s", "in sync", title="HA slaves",
                   title_justify="left")  # fmt: skip
        for s in slaves:
            ha.add_row(s["address"], f"{s['ackOffset']:,}", human_bytes(s["lagBytes"]),
                       f"{s['lagSeconds']:.1f}", "yes" if s["inSync"] else "NO")  # fmt: skip
        parts.append(ha)
    elif "masterHaAddress" in new.ha:
        parts.append(Text(f"slave of {new.ha['masterHaAddress'] or '?'}"))
    else:
        parts.append(Text("HA: no slave connected"))
    return Group(*parts)


def resolve_broker(store_dir: str, namesrv: str | None, broker: str | None) -> str:
    """The address to watch: ``broker`` itself when it is an address and no namesrv is
    given; else ``broker`` (a name or an address) or the only master, looked up with
    ``namesrv``; else the broker ``shmq start --store store_dir`` runs."""
    if namesrv is None and broker is not None and ":" in broker:
        return broker
    if namesrv is None and broker is not None:
        raise click.UsageError("a broker name needs --namesrv; or give its HOST:PORT")
    if namesrv is None:
        from shmq_cli.server import _not_running, _running

        store_dir = os.path.abspath(os.path.expanduser(store_dir))
        info = _running(store_dir)
        if not info:
            raise ShmqError(_not_running(store_dir))
        return info["broker"]
    from shmq.client.admin.admin import Admin

    with Admin(namesrv, **client_options()) as admin:
        table = admin.cluster_info().get("brokerAddrTable", {})
    masters = {name: d["brokerAddrs"]["0"] for name, d in table.items()
               if "0" in d.get("brokerAddrs", {})}  # fmt: skip
    if broker is not None:
        if broker in masters:
            return masters[broker]
        if ":" in broker:
            return broker
        raise ShmqError(f"broker {broker} is not registered with namesrv {namesrv}")
    if len(masters) == 1:
        return next(iter(masters.values()))
    if not masters:
        raise ShmqError(f"no broker is registered with namesrv {namesrv}")
    raise ShmqError(f"namesrv {namesrv} knows several brokers ({', '.join(sorted(masters))}): "
                    "choose one with --broker")  # fmt: skip


def watch(addr: str, interval: float, iterations: int) -> None:
    """Show ``addr`` every ``interval`` seconds, ``iterations`` times (0: until Ctrl-C)."""
    from rich.console import Console
    from rich.live import Live

    console = Console()
    keep = max(2, int(RATE_WINDOW_S / interval) + 1)
    history: collections.deque[Snapshot] = collections.deque(maxlen=keep)
    sampler = BrokerSampler(addr, options=client_options())
    live = Live(console=console, auto_refresh=False) if console.is_terminal else None
    try:
        if live is not None:
            live.start()
        started, shown = time.monotonic(), 0
        while True:
            history.append(sampler.sample())
            view = render(history)
            if live is not None:
                live.update(view, refresh=True)
            else:
                console.print(f"--- {time.strftime('%H:%M:%S')}")
                console.print(view)
            shown += 1
            if iterations and shown >= iterations:
                return
            time.sleep(max(0.0, started + shown * interval - time.monotonic()))
    except KeyboardInterrupt:
        return
    finally:
        if live is not None:
            live.stop()
        sampler.close()


STORE_HELP = "Store directory of a broker `shmq start` runs (without --namesrv / --broker)."


@click.command("top")
@click.option("--store", "store_dir", default=DEFAULT_STORE_ROOT, show_default=True,
              type=click.Path(file_okay=False), help=STORE_HELP)  # fmt: skip
@click.option("-n", "--namesrv", help="Find the broker with these namesrv(s), ';'-separated.")
@click.option("-b", "--broker", help="Broker name (with --namesrv) or HOST:PORT.")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between refreshes.")  # fmt: skip
@click.option("--iterations", default=0, type=click.IntRange(min=0),
              help="Stop after this many refreshes (0: until Ctrl-C).")  # fmt: skip
@connection_options
def top(
    store_dir: str, namesrv: str | None, broker: str | None, interval: float, iterations: int
) -> None:
    """A live view of a running broker: rates per topic, lag per group, disk, agents, HA."""
    watch(resolve_broker(store_dir, namesrv, broker), interval, iterations)
