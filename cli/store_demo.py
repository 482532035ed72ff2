"""``shmq store-demo``: the storage engine end to end in one process.

Opens an embedded ``MessageStore``, appends messages in batches through ``put_batch`` (every
tenth batch with a key per message, tags alternating TagA/TagB), dispatches (builds consume
queues and the index), reads every message back through ``get`` queue by queue and checks its
queue offset, tags and body, looks one message up by key and one by message id, and prints
what it measured. Rates time the store calls only: making the bodies and checking them is
left out.

Nothing numba-related is imported at module level (see ``shmq_cli.main``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from shmq.errors import ShmqError

if TYPE_CHECKING:
    import numpy as np
    from rich.console import Console

    from shmq.store import MessageStore

MAX_BODY = 4 * 1024 * 1024  # RocketMQ's default maxMessageSize
BATCH_BYTES = 8 * 1024 * 1024  # cap on the body bytes of one put_batch
KEYED_EVERY = 10  # every tenth batch carries a key per message
TAGS = ("TagA", "TagB")
RECORD_OVERHEAD_ESTIMATE = 200  # header, topic and properties bytes per record, roughly


class DemoError(ShmqError):
    """The store answered something the demo did not expect (a failed check)."""


@dataclass
class Plan:
    """Which messages went where: per queue, the (first message index, count, tags) of each
    batch in append order, and the queue offset of that queue's first message."""

    batches: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)
    first_offset: dict[int, int] = field(default_factory=dict)
    run: str = field(default_factory=lambda: f"{time.time_ns() // 1000:x}")  # keys unique per run
    keyed: list[int] = field(default_factory=list)  # first message index of keyed batches
    sample_msg_id: str = ""
    sample_index: int = -1
    sample_phys: int = -1


class Bodies:
    """Deterministic bodies: message ``i`` is a slice of a random pool chosen by ``i``, with
    ``i`` itself (little-endian) in its first 8 bytes, so every body is checkable."""

    def __init__(self, size: int) -> None:
        import numpy as np

        self.size = size
        self.pool = np.random.default_rng(0x5A4D51).integers(0, 256, size + 4096, dtype=np.uint8)
        self.windows = np.lib.stride_tricks.sliding_window_view(self.pool, size)

    def rows(self, first: int, n: int) -> np.ndarray:
        """Bodies of messages ``first .. first+n-1`` as an ``(n, size)`` uint8 array."""
        import numpy as np

        index = np.arange(first, first + n, dtype=np.uint64)
        rows = self.windows[(index * np.uint64(7919)) % np.uint64(4096)]
        k = min(8, self.size)
        rows[:, :k] = index.astype("<u8").view(np.uint8).reshape(n, 8)[:, :k]
        return rows

    def batch(self, first: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(data, offsets)`` as ``put_batch`` takes them."""
        import numpy as np

        data = self.rows(first, n).reshape(-1)
        return data, np.arange(n + 1, dtype=np.int64) * self.size


def key_of(topic: str, run: str, index: int) -> str:
    return f"{topic}-{run}-{index}"


def commitlog_file_size(store_dir: Path, count: int, size: int) -> int:
    """An existing store keeps its file size; a new one gets a power of two that holds the
    demo's data (at least 4 MiB, at most RocketMQ's 1 GiB default) and a whole record."""
    commitlog = store_dir / "commitlog"
    if commitlog.is_dir():
        names = sorted(n for n in os.listdir(commitlog) if n.isdigit())
        if names:
            return os.path.getsize(commitlog / names[0])
    need = max(count * (size + RECORD_OVERHEAD_ESTIMATE), 2 * (size + 64 * 1024))
    file_size = 4 << 20
    while file_size < need and file_size < 1 << 30:
        file_size <<= 1
    return file_size


@click.command("store-demo")
@click.option(
    "--store",
    "store_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store directory to use (created if missing, kept). Default: a temporary directory, "
    "removed afterwards unless --keep.",
)
@click.option(
    "--count", type=click.IntRange(min=1), default=100_000, show_default=True, help="Messages."
)
@click.option(
    "--size",
    type=click.IntRange(1, MAX_BODY),
    default=100,
    show_default=True,
    help="Body size in bytes.",
)
@click.option("--topic", default="DemoTopic", show_default=True, help="Topic to write.")
@click.option(
    "--queues",
    type=click.IntRange(1, 1024),
    default=4,
    show_default=True,
    help="Queues; batches go round-robin.",
)
@click.option(
    "--batch",
    "batch_size",
    type=click.IntRange(1, 100_000),
    default=1000,
    show_default=True,
    help="Messages per put_batch (fewer when bodies are large).",
)
@click.option("--keep", is_flag=True, help="Keep the temporary store directory.")
def store_demo(
    store_path: Path | None,
    count: int,
    size: int,
    topic: str,
    queues: int,
    batch_size: int,
    keep: bool,
) -> None:
    """Append, dispatch, read back and query messages in an embedded store."""
    from rich.console import Console

    out = Console()
    err = Console(stderr=True)
    if not out.is_terminal:  # piped or captured: wide enough that ids are not cut
        out = Console(width=110)
    temp = store_path is None
    store_dir = Path(tempfile.mkdtemp(prefix="shmq-store-demo-")) if temp else store_path
    assert store_dir is not None
    keep = keep or not temp
    per_batch = max(1, min(batch_size, BATCH_BYTES // size))
    out.print(
        f"[bold]shmq store-demo[/]: {count:,} messages of {size:,} B into topic "
        f"[cyan]{topic}[/] ({queues} queues, batches of {per_batch:,}), store {store_dir}"
    )
    try:
        results = _run(out, err, store_dir, count, size, topic, queues, per_batch)
    finally:
        if keep and store_dir.is_dir():
            out.print(f"store kept at {store_dir}")
        else:
            shutil.rmtree(store_dir, ignore_errors=True)
    _print_results(out, results)


def _run(
    out: Console,
    err: Console,
    store_dir: Path,
    count: int,
    size: int,
    topic: str,
    queues: int,
    per_batch: int,
) -> dict[str, Any]:
    from shmq.store import MessageStore

    r: dict[str, Any] = {"count": count, "size": size, "queues": queues, "per_batch": per_batch}
    with err.status("loading numba kernels (a first run compiles them: about 10-15 s)"):
        r["warmup_s"] = _warm_up(size)
    file_size = commitlog_file_size(store_dir, count, size)
    r["file_size"] = file_size
    t0 = time.perf_counter()
    store = MessageStore.open(store_dir, mapped_file_size_commit_log=file_size)
    r["open_s"] = time.perf_counter() - t0
    try:
        bodies = Bodies(size)
        plan = _append(err, store, bodies, r, count, topic, queues, per_batch)
        t0 = time.perf_counter()
        r["dispatched"] = store.dispatch()
        r["dispatch_s"] = time.perf_counter() - t0
        _read_back(err, store, bodies, plan, r, topic, count)
        _lookups(store, bodies, plan, r, topic)
        r["stats"] = store.stats()
    finally:
        t0 = time.perf_counter()
        store.close()
        r["close_s"] = time.perf_counter() - t0
    return r


def _warm_up(size: int) -> float:
    """Load (or compile) the numba kernels on a scratch store, so the timings that follow
    measure the store and not the JIT."""
    from shmq.store import MessageStore

    t0 = time.perf_counter()
    scratch = tempfile.mkdtemp(prefix="shmq-store-demo-warmup-")
    try:
        file_size = 1 << 20
        while file_size < 2 * (size + 64 * 1024):
            file_size <<= 1
        with MessageStore.open(
            scratch,
            mapped_file_size_commit_log=file_size,
            preallocate_mapped_file_enable=False,
            max_hash_slot_num=64,
            max_index_num=256,
        ) as store:
            bodies = Bodies(size)
            store.put_batch("Warmup", 0, bodies.batch(0, 2), tags="T", keys=["k0", None])
            store.put("Warmup", 0, bodies.rows(2, 1)[0].tobytes(), tags="T")
            store.dispatch()
            store.get("Warmup", 0, 0, 4, tag_filter="T")
            store.query_by_key("Warmup", "k0", 0, None, 4)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return time.perf_counter() - t0


def _progress(console: Console) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("{task.description:<8}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def _append(
    err: Console,
    store: MessageStore,
    bodies: Bodies,
    r: dict[str, Any],
    count: int,
    topic: str,
    queues: int,
    per_batch: int,
) -> Plan:
    from shmq.store import PutStatus

    plan = Plan()
    spent = 0.0
    first_phys = store.max_physical_offset
    n_batches = -(-count // per_batch)
    sample_batch = n_batches // 2
    with _progress(err) as progress:
        task = progress.add_task("append", total=count)
        for b in range(n_batches):
            first = b * per_batch
            n = min(per_batch, count - first)
            queue_id = b % queues
            tags = TAGS[b % len(TAGS)]
            keys = (
                None
                if b % KEYED_EVERY
                else [key_of(topic, plan.run, i) for i in range(first, first + n)]
            )
            batch = bodies.batch(first, n)
            t0 = time.perf_counter()
            result = store.put_batch(topic, queue_id, batch, tags=tags, keys=keys)
            spent += time.perf_counter() - t0
            if result.status is not PutStatus.PUT_OK:
                raise DemoError(
                    f"put_batch of messages {first}..{first + n - 1} answered {result.status.value}"
                )
            if result.count != n:
                raise DemoError(f"put_batch stored {result.count} of {n} messages")
            plan.first_offset.setdefault(queue_id, int(result.queue_offsets[0]))
            plan.batches.setdefault(queue_id, []).append((first, n, tags))
            if keys is not None:
                plan.keyed.append(first)
            if b == sample_batch:
                k = n // 2
                plan.sample_index = first + k
                plan.sample_msg_id = result.msg_ids[k]
                plan.sample_phys = int(result.physical_offsets[k])
            progress.advance(task, n)
    r["append_s"] = spent
    r["commitlog_bytes"] = store.max_physical_offset - first_phys
    return plan


def _read_back(
    err: Console,
    store: MessageStore,
    bodies: Bodies,
    plan: Plan,
    r: dict[str, Any],
    topic: str,
    count: int,
) -> None:
    from shmq.store import GetStatus

    spent = 0.0
    calls = 0
    verified = 0
    with _progress(err) as progress:
        task = progress.add_task("read", total=count)
        for queue_id in sorted(plan.batches):
            offset = plan.first_offset[queue_id]
            for first, n, tags in plan.batches[queue_id]:
                expected = bodies.rows(first, n)
                k = 0
                while k < n:
                    t0 = time.perf_counter()
                    got = store.get(topic, queue_id, offset, n - k)
                    spent += time.perf_counter() - t0
                    calls += 1
                    if got.status is not GetStatus.FOUND or not got.messages:
                        raise DemoError(
                            f"get({topic!r}, {queue_id}, {offset}) answered {got.status.value} "
                            f"with {verified:,} of {count:,} messages read "
                            f"(queue offsets {got.min_offset}..{got.max_offset})"
                        )
                    for msg in got.messages[: n - k]:
                        index = first + k
                        if msg.queue_offset != offset:
                            raise DemoError(
                                f"queue {queue_id}: message {index} has queue offset "
                                f"{msg.queue_offset}, expected {offset}"
                            )
                        if msg.body != expected[k].tobytes():
                            raise DemoError(
                                f"queue {queue_id} offset {offset}: body of message {index} "
                                "differs from what was written"
                            )
                        if msg.tags != tags:
                            raise DemoError(
                                f"queue {queue_id} offset {offset}: tags {msg.tags!r}, "
                                f"expected {tags!r}"
                            )
                        offset += 1
                        k += 1
                        verified += 1
                    progress.advance(task, len(got.messages[:n]))
    r["read_s"] = spent
    r["get_calls"] = calls
    r["verified"] = verified


def _lookups(
    store: MessageStore, bodies: Bodies, plan: Plan, r: dict[str, Any], topic: str
) -> None:
    index = plan.keyed[len(plan.keyed) // 2]  # batch 0 is keyed, so there is one
    key = key_of(topic, plan.run, index)
    t0 = time.perf_counter()
    found = store.query_by_key(topic, key, 0, int(time.time() * 1000) + 60_000, 32)
    r["query_s"] = time.perf_counter() - t0
    if len(found) != 1 or found[0].body != bodies.rows(index, 1)[0].tobytes():
        raise DemoError(f"query_by_key({topic!r}, {key!r}) found {len(found)} messages, not 1")
    if key not in found[0].keys:
        raise DemoError(f"query_by_key({key!r}) answered a message with keys {found[0].keys}")
    r["query_key"] = key
    t0 = time.perf_counter()
    msg = store.view(plan.sample_msg_id)
    r["view_s"] = time.perf_counter() - t0
    if msg is None:
        raise DemoError(f"view({plan.sample_msg_id!r}) found nothing")
    if msg.physical_offset != plan.sample_phys or (
        msg.body != bodies.rows(plan.sample_index, 1)[0].tobytes()
    ):
        raise DemoError(f"view({plan.sample_msg_id!r}) answered another message")
    r["view_msg_id"] = plan.sample_msg_id


def _rate(n: float, seconds: float) -> str:
    return f"{n / seconds:,.0f}" if seconds > 0 else "-"


def _print_results(out: Console, r: dict[str, Any]) -> None:
    from rich.table import Table

    count, size = r["count"], r["size"]
    mb = count * size / 1e6
    table = Table(
        title="store-demo results",
        caption="Rates time the store calls only (making and checking bodies is left out). "
        "MB = 10^6 bytes of bodies. get() hands out at most 32 messages per call "
        "(maxTransferCountOnMessageInMemory).",
        caption_justify="left",
    )
    table.add_column("step")
    table.add_column("result", justify="right")
    table.add_column("rate", justify="right")
    table.add_row("numba warm-up (scratch store)", f"{r['warmup_s']:.2f} s", "")
    table.add_row("open store", f"{r['open_s'] * 1000:.1f} ms", "")
    table.add_row(
        "append (put_batch)",
        f"{count:,} msgs, {mb:,.1f} MB in {r['append_s']:.3f} s",
        f"{_rate(count, r['append_s'])} msg/s\n{_rate(mb, r['append_s'])} MB/s",
    )
    table.add_row(
        "commitlog written",
        f"{r['commitlog_bytes'] / 1e6:,.1f} MB in files of {r['file_size'] >> 20} MiB",
        "",
    )
    table.add_row(
        "dispatch (reput: CQ + index)",
        f"{r['dispatched']:,} records in {r['dispatch_s']:.3f} s",
        f"{_rate(r['dispatched'], r['dispatch_s'])} rec/s",
    )
    table.add_row(
        "read back (get) and verify",
        f"{r['verified']:,} msgs ok in {r['read_s']:.3f} s ({r['get_calls']:,} calls)",
        f"{_rate(r['verified'], r['read_s'])} msg/s",
    )
    table.add_row("query by key", f"{r['query_key']}: 1 found", f"{r['query_s'] * 1000:.2f} ms")
    table.add_row("view by msg id", f"{r['view_msg_id']}: found", f"{r['view_s'] * 1000:.2f} ms")
    table.add_row("close (flush)", f"{r['close_s'] * 1000:.1f} ms", "")
    out.print(table)

    stats = Table(title="store stats")
    stats.add_column("stat")
    stats.add_column("value", justify="right")
    for name, value in _flatten(r["stats"]):
        stats.add_row(name, f"{value:,}" if isinstance(value, int) else str(value))
    out.print(stats)
    out.print(f"[green]ok[/]: {r['verified']:,} of {count:,} messages read back and verified")


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for name, value in d.items():
        if isinstance(value, dict):
            rows.extend(_flatten(value, f"{prefix}{name}."))
        elif not isinstance(value, bool):
            rows.append((f"{prefix}{name}", value))
        else:
            rows.append((f"{prefix}{name}", str(value).lower()))
    return rows
