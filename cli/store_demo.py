"""``shmq store-demo``: the storage engine end to end in one process, with visible output.

Appends messages, dispatches them into consume queues and the index, reads every one back
and checks it, queries by key and by message id, and prints what it measured.
"""

from __future__ import annotations

import shutil
import tempfile
import time

import click
from shmq_cli.errors import cli_errors

BATCH = 1000


def _warm_up() -> None:
    """Load every kernel the demo uses on a scratch store, so timings exclude numba's
    one-time load (or, on a fresh install, compile)."""
    from shmq.store import MessageStore

    with (
        tempfile.TemporaryDirectory(prefix="shmq-warm-") as scratch,
        MessageStore.open(scratch, mapped_file_size_commit_log=1 << 16) as store,
    ):
        store.put_batch("Warm", 0, [b"a", b"b"], tags="t", keys=["k", None])
        store.dispatch()
        store.get("Warm", 0, 0, 2)
        store.query_by_key("Warm", "k")


@click.command("store-demo")
@click.option("--store", "store_dir", type=click.Path(file_okay=False), help="Store directory.")
@click.option("--count", default=100_000, show_default=True, type=click.IntRange(1, 10**8))
@click.option("--size", default=100, show_default=True, type=click.IntRange(1, 4 * 1024 * 1024))
@click.option("--topic", default="DemoTopic", show_default=True)
@click.option("--queues", default=4, show_default=True, type=click.IntRange(1, 256))
@click.option("--keep", is_flag=True, help="Keep the temporary store instead of deleting it.")
@cli_errors
def store_demo(
    store_dir: str | None, count: int, size: int, topic: str, queues: int, keep: bool
) -> None:
    """Write, dispatch, read back and query COUNT messages in an embedded store."""
    import numpy as np
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from shmq.store import GetStatus, MessageStore

    console = Console()
    with console.status("loading kernels"):
        _warm_up()
    root = store_dir or tempfile.mkdtemp(prefix="shmq-demo-")
    file_size = max(64 << 20, 1 << (count * (size + 120)).bit_length())
    try:
        with MessageStore.open(root, mapped_file_size_commit_log=min(file_size, 1 << 30)) as store:
            console.print(f"store [bold]{root}[/] opened ({store.recovery.stop_reason})")
            payload = np.frombuffer((b"shmq-demo " * (size // 10 + 1))[:size], dtype=np.uint8)
            keyed_id = None
            started = time.perf_counter()
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task("appending", total=count)
                done = 0
                while done < count:
                    n = min(BATCH, count - done)
                    data = np.tile(payload, n)
                    offsets = np.arange(0, (n + 1) * size, size, dtype=np.int64)
                    qid = (done // BATCH) % queues
                    keys = [f"order-{done + i}" if i == 0 else None for i in range(n)]
                    result = store.put_batch(topic, qid, (data, offsets), tags="demo", keys=keys)
                    if keyed_id is None:
                        keyed_id = result.msg_ids[0]
                    done += n
                    progress.update(task, advance=n)
            store.flush()
            write_s = time.perf_counter() - started

            started = time.perf_counter()
            store.dispatch()
            dispatch_s = time.perf_counter() - started

            started = time.perf_counter()
            read = 0
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task("reading back", total=count)
                for qid in range(queues):
                    offset = store.get_min_offset_in_queue(topic, qid)
                    while True:
                        got = store.get(topic, qid, offset, 32)
                        if got.status is not GetStatus.FOUND:
                            break
                        for msg in got.messages:
                            if msg.body != payload.tobytes():
                                raise click.ClickException(
                                    f"message {msg.msg_id} read back different bytes"
                                )
                        read += len(got.messages)
                        progress.update(task, advance=len(got.messages))
                        offset = got.next_begin_offset
            read_s = time.perf_counter() - started
            if read < count:
                raise click.ClickException(f"read back {read} of {count} messages")

            by_key = store.query_by_key(topic, "order-0")
            by_id = store.view(keyed_id) if keyed_id else None
            stats = store.stats()

        mb = count * size / 1e6
        table = Table(title=f"shmq store demo: {count:,} × {size} B on {queues} queues")
        table.add_column("step")
        table.add_column("result", justify="right")
        table.add_column("rate", justify="right")
        table.add_row("append (put_batch)", f"{count:,} msgs", f"{count / write_s:,.0f} msg/s")
        table.add_row("", f"{mb:,.1f} MB", f"{mb / write_s:,.0f} MB/s")
        queues_text = f"{stats['consume_queues']} queues"
        table.add_row("dispatch (reput)", queues_text, f"{count / dispatch_s:,.0f} msg/s")
        table.add_row("read back (get)", f"{read:,} msgs ok", f"{read / read_s:,.0f} msg/s")
        table.add_row("query by key", f"{len(by_key)} found", "order-0")
        table.add_row("view by msg id", "found" if by_id else "MISSING", keyed_id or "")
        log_size = f"{stats['commitlog_max_offset']:,} B"
        table.add_row("commitlog", log_size, f"{stats['commitlog_files']} file(s)")
        index = stats["index"]
        table.add_row("index", f"{index['entries']} keys", f"{index['files']} file(s)")
        console.print(table)
        if not by_key or by_id is None:
            raise click.ClickException("query by key or by message id found nothing")
    finally:
        if not store_dir and not keep:
            shutil.rmtree(root, ignore_errors=True)
        elif keep:
            console.print(f"store kept at {root}")
