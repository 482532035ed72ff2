"""``shmq broker``, ``shmq start``, ``shmq stop`` and ``shmq status``: running the broker.

``shmq start`` is the embedded default: a namesrv and a broker in one process group with a
store under ``~/.shmq/store``. It writes ``shmq.json`` (addresses and pid) into the store
directory, which ``stop`` and ``status`` read; ``--daemon`` runs it in the background with
its log in ``shmq.log`` there.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time

import click

from shmq import files
from shmq.config import DEFAULT_STORE_ROOT
from shmq.errors import ShmqError
from shmq.ipc.procs import same_process, start_time
from shmq_cli.feedback import ByteSize, human_bytes

RUNTIME_FILE = "shmq.json"
LOG_FILE = "shmq.log"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 90.0
DEFAULT_MAPPED_FILE_SIZE = 1 << 30  # RocketMQ's mappedFileSizeCommitLog, for real use
DEMO_MAPPED_FILE_SIZE = 64 << 20  # --demo: a store for trying shmq out
METRICS_HELP = (
    "Serve the broker's metrics for Prometheus (metricsExporterType=PROM) on "
    "metricsPromExporterPort, 5557 unless the config says otherwise."
)
DAEMON_ENV = "SHMQ_DAEMON"  # set for the background process of `shmq start --daemon`
COMPILING = (
    "compiling shmq's kernels for this host, once after an install or upgrade "
    "(about 15-30 s on 2 cores; cached in {cache})"
)


def _stop_on_signals(broker) -> None:
    """SIGTERM/SIGINT ask ``broker`` (a ``Broker`` or an ``EmbeddedBroker``) to stop cleanly.
    Installed before ``start``: a signal that arrives while the broker starts (its control
    server already answers, so a client may take it for up) then stops it once started,
    segments unlinked, instead of killing the process halfway and leaving them in /dev/shm.

    The handler only sets the broker's stop flag (``request_stop`` takes no lock) and counts:
    a second signal (Ctrl-C twice, a service manager's SIGTERM after SIGINT) changes nothing
    while the clean stop runs; a third ends the process at once (the agents die with it, and
    the next start removes the shared memory it leaves and recovers the store)."""
    count = 0

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal count
        count += 1
        broker.request_stop()
        if count == 2:  # os.write: no lock, unlike print in a handler
            os.write(2, b"shmq: stopping cleanly; a third signal stops at once\n")
        elif count >= 3:
            os.write(2, b"shmq: stopped at once, without a clean stop\n")
            os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)


def _run_until_signal(broker) -> None:
    """Run in the foreground until ``_stop_on_signals``' signals (exit status 0), then stop
    ``broker`` (an ``EmbeddedBroker`` stops its NameServer too). A broker that stopped itself
    (a fault it could not isolate) exits 1 with the reason."""
    try:
        broker.wait()  # its first stop steps run here, in the main thread
    finally:
        broker.stop()
    if broker.stop_reason:
        raise ShmqError(f"the broker stopped itself: {broker.stop_reason}")


@click.command("broker")
@click.option("-c", "--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="broker.conf (RocketMQ keys) or a .toml file.")  # fmt: skip
@click.option("-n", "--namesrv", help="namesrvAddr override, e.g. 127.0.0.1:9876.")
@click.option("--metrics", is_flag=True, help=METRICS_HELP)
def broker(config_path: str, namesrv: str | None, metrics: bool) -> None:
    """Run one broker (supervisor, writer, reput and flush agents, control server)."""
    from shmq.broker.config.broker_config import load_broker_config
    from shmq.broker.supervisor import Broker

    cfg = load_broker_config(config_path)
    if namesrv:
        cfg = cfg.replace(namesrv_addr=namesrv)
    if metrics:
        cfg = cfg.replace(metrics_exporter_type="PROM")
    _compile_kernels()
    b = Broker(cfg, log_level=_level())
    _stop_on_signals(b)
    b.start()
    click.echo(f"broker {cfg.broker_name} listening on {b.address}", nl=True)
    if b.metrics is not None:
        click.echo(b.metrics.describe())
    sys.stdout.flush()
    _run_until_signal(b)


@click.command("start")
@click.option("--store", "store_dir", default=DEFAULT_STORE_ROOT, show_default=True,
              type=click.Path(file_okay=False), help="Store directory.")  # fmt: skip
@click.option("--namesrv-port", default=9876, show_default=True, type=int)
@click.option("--broker-port", default=10911, show_default=True, type=int)
@click.option("--flush", "flush_disk_type", type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]),
              default="ASYNC_FLUSH", show_default=True)  # fmt: skip
@click.option("--mapped-file-size", type=ByteSize(),
              help="CommitLog file size (mappedFileSizeCommitLog), e.g. 64M; each file is "
                   "allocated whole.  [default: 1G, --demo: 64M]")  # fmt: skip
@click.option(
    "--demo",
    is_flag=True,
    help="A small store for trying shmq out: 64 MiB CommitLog files, not 1 GiB.",
)
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False),
              help="Optional broker.conf/TOML with more settings.")  # fmt: skip
@click.option("--metrics", is_flag=True, help=METRICS_HELP)
@click.option("--daemon", is_flag=True, help="Run in the background; stop with `shmq stop`.")
@click.option("--start-timeout", default=START_TIMEOUT_S, show_default=True, type=float,
              help="--daemon: seconds to wait for the broker, which is stopped after.")  # fmt: skip
def start(
    store_dir: str,
    namesrv_port: int,
    broker_port: int,
    flush_disk_type: str,
    mapped_file_size: int | None,
    demo: bool,
    config_path: str | None,
    metrics: bool,
    daemon: bool,
    start_timeout: float,
) -> None:
    """Start a namesrv and a broker on this host (foreground, or --daemon)."""
    store_dir = os.path.abspath(os.path.expanduser(store_dir))
    _check_writable(store_dir)
    runtime = os.path.join(store_dir, RUNTIME_FILE)
    existing = _running(store_dir)
    if existing:
        raise ShmqError(f"shmq is already running for {store_dir} (pid {existing['pid']})")
    if mapped_file_size is None:
        mapped_file_size = DEMO_MAPPED_FILE_SIZE if demo else DEFAULT_MAPPED_FILE_SIZE
    from shmq.broker.config.broker_config import BrokerConfig, load_broker_config

    # here, before a daemon detaches: the config's warnings and errors reach this terminal
    base = load_broker_config(config_path) if config_path else BrokerConfig()
    if metrics:
        base = base.replace(metrics_exporter_type="PROM")
    if not os.environ.get(DAEMON_ENV):  # a daemon's parent compiled them a moment ago
        _compile_kernels()
    if daemon:
        _start_daemon(store_dir, start_timeout)
        return
    from shmq.embedded import EmbeddedBroker

    mq = EmbeddedBroker(
        store_dir,
        namesrv_port=namesrv_port,
        base=base,
        log_level=_level(),
        listen_port=broker_port,
        flush_disk_type=flush_disk_type,
        mapped_file_size_commit_log=mapped_file_size,
        store_host=f"127.0.0.1:{broker_port}",
    )  # the NameServer's KV config is kept with the store, in namesrv/
    _stop_on_signals(mq)
    mq.start()
    try:
        _serve(mq, store_dir, runtime, mapped_file_size)
    finally:
        mq.stop()  # after a failure too (e.g. no room for shmq.json): nothing left running
    _say("shmq stopped")


def _serve(mq, store_dir: str, runtime: str, mapped_file_size: int) -> None:
    """Write ``shmq.json`` for ``stop`` and ``status``, then run until a signal."""
    info = {
        "pid": os.getpid(),
        "pidStarted": start_time(os.getpid()),
        "namesrv": mq.namesrv,
        "broker": mq.broker_address,
        "store": store_dir,
        "mappedFileSizeCommitLog": mapped_file_size,
        "started": int(time.time() * 1000),
    }
    with os.fdopen(files.create(runtime + ".tmp", os.O_WRONLY | os.O_TRUNC), "w") as f:
        json.dump(info, f)
    os.replace(runtime + ".tmp", runtime)
    _say(f"shmq started: namesrv {mq.namesrv}, broker {mq.broker_address}, store {store_dir}")
    _say(_store_line(store_dir, mapped_file_size))
    if mq.broker.metrics is not None:
        _say(mq.broker.metrics.describe())
    sys.stdout.flush()
    try:
        _run_until_signal(mq)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(runtime)


def _say(text: str) -> None:
    """A line for the user; in a daemon's log (``shmq.log``) with a timestamp, like the
    log records around it."""
    if os.environ.get(DAEMON_ENV):
        text = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}"
    click.echo(text)


def _check_writable(store_dir: str) -> None:
    """The store directory exists (created private) and takes files, or a clear error."""
    import tempfile

    try:
        files.makedirs(store_dir)
        tempfile.TemporaryFile(dir=store_dir).close()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ShmqError(
            f"cannot write the store directory {store_dir}: {reason}; "
            "choose another with --store DIR"
        ) from exc


def _compile_kernels() -> None:
    """At a host's first start after an install or upgrade, compile every kernel of the
    broker and its clients (a first ``shmq produce`` or ``consume`` then loads them), with a
    line saying so and how long it took. Afterwards this costs nothing: each process loads
    what it uses from the cache."""
    from shmq import kernel_cache

    if kernel_cache.is_warm():
        return
    from shmq.broker.kernels import compile_kernels

    click.echo(COMPILING.format(cache=kernel_cache.kernel_dir()), err=True)
    started = time.monotonic()
    compile_kernels()
    click.echo(f"compiled in {time.monotonic() - started:.0f} s", err=True)


def _store_line(store_dir: str, file_size: int) -> str:
    """What the store takes on disk now, what it will take, and how to make that smaller."""
    used = 0
    for path, _dirs, names in os.walk(store_dir):
        for name in names:
            with contextlib.suppress(OSError):
                used += os.stat(os.path.join(path, name)).st_blocks * 512
    line = (
        f"store {store_dir}: {human_bytes(used)} on disk; CommitLog files of "
        f"{human_bytes(file_size)} are allocated whole, the next one ahead"
    )
    if file_size > DEMO_MAPPED_FILE_SIZE:
        line += " (to try shmq out: `shmq start --demo`, 64 MiB files)"
    return line


def _start_daemon(store_dir: str, timeout: float) -> None:
    args = [sys.argv[0] if sys.argv[0].endswith("shmq") else sys.executable]
    if args[0] == sys.executable:
        args += ["-m", "shmq_cli.main"]
    argv = [a for a in sys.argv[1:] if a != "--daemon"]
    log_path = os.path.join(store_dir, LOG_FILE)
    log_start = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    with os.fdopen(files.create(log_path, os.O_WRONLY | os.O_APPEND), "ab") as log_file:
        proc = subprocess.Popen(
            args + argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
            env={**os.environ, DAEMON_ENV: "1"},
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = _read_runtime(store_dir)
        if info and info["pid"] == proc.pid:
            click.echo(
                f"shmq started in the background (pid {proc.pid}): namesrv {info['namesrv']}, "
                f"broker {info['broker']}; log {log_path}"
            )
            click.echo(_store_line(store_dir, info["mappedFileSizeCommitLog"]))
            return
        if proc.poll() is not None:
            why = _error_lines(log_path, log_start) or f"exit status {proc.returncode}"
            raise ShmqError(f"shmq failed to start: {why} (log: {log_path})")
        time.sleep(0.1)
    _give_up(proc)
    raise ShmqError(f"shmq did not start within {timeout:g} s and was stopped; see {log_path}")


def _give_up(proc: subprocess.Popen) -> None:
    """Stop a daemon that did not start in time, and all it started: SIGTERM (it stops
    cleanly once started, see ``_stop_on_signals``), then after ``STOP_TIMEOUT_S`` SIGKILL
    to its process group (the daemon leads a session of its own: its agents, namesrv and
    proxy are in it) and unlink the shared memory its broker left."""
    from shmq.ipc.segment import unlink_orphans

    proc.terminate()
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # its agents exit once they see the supervisor gone
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    unlink_orphans()


def _group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@click.command("stop")
@click.option("--store", "store_dir", default=DEFAULT_STORE_ROOT, show_default=True,
              type=click.Path(file_okay=False))  # fmt: skip
def stop(store_dir: str) -> None:
    """Stop what `shmq start --store DIR` started (clean shutdown, waits for it)."""
    store_dir = os.path.abspath(os.path.expanduser(store_dir))
    info = _running(store_dir)
    if not info:
        raise ShmqError(_not_running(store_dir))
    pid, started = info["pid"], info.get("pidStarted")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while same_process(pid, started):
        if time.monotonic() > deadline:
            raise ShmqError(f"shmq (pid {pid}) did not stop within {STOP_TIMEOUT_S:.0f} s")
        time.sleep(0.1)
    click.echo(f"shmq stopped (pid {pid})")


@click.command("status")
@click.option("--store", "store_dir", default=DEFAULT_STORE_ROOT, show_default=True,
              type=click.Path(file_okay=False))  # fmt: skip
@click.option("--broker", "broker_addr", help="Ask this broker address instead.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--interval", default=1.0, show_default=True,
              help="Seconds between the two samples for the per-second rates.")  # fmt: skip
@click.option("--watch", "watch", is_flag=True,
              help="Refresh a live view every --interval (as `shmq top`).")  # fmt: skip
def status(
    store_dir: str, broker_addr: str | None, as_json: bool, interval: float, watch: bool
) -> None:
    """Processes, offsets, rates and rings of a running broker."""
    from shmq.remoting.admin_bodies import runtime_stats
    from shmq.remoting.client import RemotingClient
    from shmq.remoting.protocol import RequestCode

    if watch:
        from shmq_cli import top

        if as_json:
            raise click.UsageError("--watch shows a live view: it takes no --json")
        if interval < 0.1:
            raise click.UsageError("--watch needs an --interval of 0.1 s or more")
        top.watch(top.resolve_broker(store_dir, None, broker_addr), interval, 0)
        return

    if broker_addr is None:
        store_dir = os.path.abspath(os.path.expanduser(store_dir))
        info = _running(store_dir)
        if not info:
            raise ShmqError(_not_running(store_dir))
        broker_addr = info["broker"]
    with RemotingClient() as client:
        _, first = client.invoke_json(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        time.sleep(interval)
        _, stats = client.invoke_json(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    first, stats = runtime_stats(first), runtime_stats(stats)
    for name in ("msgs_in", "msgs_dispatched", "msgs_out"):  # out: what consumers read
        stats[f"{name}_per_s"] = round((stats[name] - first[name]) / interval, 1)
    processes = [{"role": "supervisor", "pid": stats["pid"], "alive": True}]
    processes += [{"role": k, **v} for k, v in stats["agents"].items()]
    stats["processes"] = processes
    if as_json:
        click.echo(json.dumps(stats, indent=2))
        return
    _print_status(stats)


def _print_status(stats: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"broker [bold]{stats['broker']}[/] at {stats['address']}, store {stats['store']}, "
        f"{stats['flush_disk_type']}, {stats.get('broker_role', 'ASYNC_MASTER')}"
    )
    procs = Table("role", "pid", "alive", "restarts")
    for p in stats["processes"]:
        procs.add_row(p["role"], str(p["pid"]), "yes" if p["alive"] else "NO",
                      str(p.get("restarts", "")))  # fmt: skip
    console.print(procs)
    counters = Table("counter", "value")
    for key in ("write_offset", "dispatched_offset", "flushed_offset", "msgs_in",
                "msgs_dispatched", "msgs_out", "msgs_in_per_s", "msgs_dispatched_per_s",
                "msgs_out_per_s", "rejected", "flushes", "flush_errors"):  # fmt: skip
        counters.add_row(key, str(stats[key]))
    console.print(counters)
    rings = Table("client", "slot", "pid", "group", "ring bytes", "used", "records", "answered")
    for c in stats["clients"]:
        rings.add_row(c["kind"], str(c["slot"]), str(c["pid"]), c["group"],
                      *(str(c.get(k, "")) for k in ("ring_bytes", "used_bytes", "records",
                                                    "answered")))  # fmt: skip
    console.print(rings)


def _running(store_dir: str) -> dict | None:
    """``shmq.json`` of the shmq that runs for ``store_dir``, or None: no file, or its pid is
    gone or now another process (a crash or a reboot left the file behind)."""
    info = _read_runtime(store_dir)
    if info and same_process(info["pid"], info.get("pidStarted")):
        return info
    return None


def _not_running(store_dir: str) -> str:
    """Why nothing runs for ``store_dir``, with what to try (removes a stale ``shmq.json``)."""
    info = _read_runtime(store_dir)
    if info:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(store_dir, RUNTIME_FILE))
        return (
            f"shmq is not running for {store_dir} (stale pid {info['pid']} in {RUNTIME_FILE}: "
            "that process is gone or is another program; the file was removed)"
        )
    return (  # `stop` has no --broker: only `status` can ask a broker by its address
        f"shmq is not running for {store_dir} (no {RUNTIME_FILE}); give the store it was "
        "started with, --store DIR (`shmq status --broker HOST:PORT` asks a broker directly)"
    )


def _error_lines(log_path: str, start: int) -> str:
    """The ``error: ...`` lines a failed start wrote to its log after byte ``start``."""
    try:
        with open(log_path, "rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    errors = [line[len("error: ") :] for line in text.splitlines() if line.startswith("error: ")]
    return "; ".join(errors)


def _read_runtime(store_dir: str) -> dict | None:
    try:
        with open(os.path.join(store_dir, RUNTIME_FILE)) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def _level() -> int:
    return logging.getLogger("shmq").getEffectiveLevel()
