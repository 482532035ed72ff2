"""The slave's HA agent (RocketMQ 4.9's ``HAService.HAClient``): receives the master's
CommitLog and writes it, byte for byte at the master's offsets, into its own.

On a slave this agent is the CommitLog's only writer (there is no writer agent: a slave
takes no sends). It connects to the master's HA address (``haMasterAddress``, or the one
the namesrv answered the supervisor's registration with), reports its max offset, and
applies each batch at the offset the master names, which must be exactly where its own
CommitLog ends (except for an empty slave, which starts where the master starts it, at a
file's start); a batch may not cross a file end. Anything else, and a disk with no room
for the next CommitLog file, ends the connection with a log line naming the problem and a
reconnect a second later; what was written stays as it was. The batches of one read that
follow each other in one file are written with one ``pwritev`` (``MappedFile.write_at``):
the received bytes are copied once, into the page cache, with no page to prefault.

Bytes received are reported as soon as they are written, before they are parsed (the
master's acks for SYNC_MASTER; RocketMQ's ``reportSlaveMaxOffsetPlus`` after each append).
The write offset the rest of the broker sees (reput, flush) only ever covers whole records:
batches may end mid-record, so after each read the new bytes are parsed and the offset
published is the end of the last whole record. A restarted agent cuts its CommitLog back
to that offset, as the writer does, and normal recovery does the same after a crash of the
whole broker.

With ``useTLS`` the connection is TLS (shmq's addition: RocketMQ's HA port is plain TCP),
for a master whose ``tlsServerMode`` is enforcing; its handshake is part of the connect.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import time

import numpy as np

from shmq.broker.agents.env import AgentEnv
from shmq.broker.agents.socket_idle import SocketIdle
from shmq.broker.agents.wakeups import AgentWakeups, parked_flag
from shmq.broker.config.broker_config import RECORD_OVERHEAD_MAX
from shmq.codec import ha_frames as hf
from shmq.codec import record as rec
from shmq.config import parse_host
from shmq.errors import DiskFullError, HAFrameError
from shmq.ipc import counters as cn
from shmq.ipc.segment import fence, open_semaphore
from shmq.message import pack_host
from shmq.remoting.security.tls import WOULD_BLOCK, open_connection, tls_pending
from shmq.store.commitlog import SCAN_ROWS, CommitLog
from shmq.store.warm_up import scratch_store

log = logging.getLogger(__name__)

READ_BUFFER = 4 << 20  # RocketMQ's slave read buffer
CONNECT_TIMEOUT_S = 1.0
RETRY_S = 1.0  # after a failed connect or a closed connection, a disk full: wait this long


def warm_up(rows: np.ndarray) -> None:
    """Scan a scratch CommitLog as the receive path scans its own (writable, into ``rows``)
    so the parse kernel is compiled, or loaded from numba's cache, before the first batch:
    loading it then (≈ 0.3 s) would stall replication while the master's bytes pile up."""
    with scratch_store() as (_, store):
        for _ in store.commitlog.scan(0, rows=rows):
            pass


class HAClient:
    def __init__(self, env: AgentEnv) -> None:
        self.env = env
        cfg = env.config
        store = cfg.store
        self.words = env.words
        self.file_size = store.mapped_file_size_commit_log
        self.heartbeat_s = cfg.ha_send_heartbeat_interval / 1000
        self.housekeeping_s = cfg.ha_housekeeping_interval / 1000
        self.sync_flush = store.sync_flush
        # a whole record is at most this far behind the bytes received
        self.max_partial = store.max_message_size + RECORD_OVERHEAD_MAX
        host, port = parse_host(store.store_host)
        self.commitlog = CommitLog(
            os.path.join(store.store_path_root_dir, "commitlog"),
            self.file_size,
            store_host=pack_host(host, port),
            preallocate=store.preallocate_mapped_file_enable,
            warm=store.warm_mapped_file_enable,
            mlock=store.mlock_mapped_file_enable,
        )
        self.commitlog.load()
        self.whole = cn.load(self.words, cn.WRITE_OFFSET)
        self.commitlog.set_write_offset(self.whole, self.max_partial)
        self.received = self.whole
        followers = ("reput", "flush") if self.sync_flush else ("reput",)
        self.followers = AgentWakeups(self.words, env.names, followers)
        self.sem = open_semaphore(env.names.agent_sem("ha"))
        self.idle = SocketIdle(self.sem, parked_flag(self.words, "ha"))
        self.sock: socket.socket | None = None
        self.master = ""
        self._rbuf = bytearray(READ_BUFFER)
        self._rows = np.empty(SCAN_ROWS, dtype=rec.RECORD_ROW)  # scan table, reused
        warm_up(self._rows)
        self._rlen = 0
        self._retry_at = 0.0
        self._reported = -1
        self._last_read = self._last_write = 0.0
        log.info("HA client resumes at CommitLog offset %d", self.whole)

    # -- the loop ---------------------------------------------------------------------------

    def has_work(self) -> bool:
        # everything this agent waits for wakes its select, but for bytes TLS decrypted ahead
        return self.sock is not None and tls_pending(self.sock) > 0

    def do_work(self) -> int:
        now = time.monotonic()
        if self.sock is None:
            self.idle.timeout_s = RETRY_S
            return self._connect(now) if now >= self._retry_at else 0
        work = 0
        if self.idle.ready():
            work = self._read()
        if self.sock is not None and now - self._last_read > self.housekeeping_s:
            self._disconnect(f"the master was silent for {self.housekeeping_s:.0f} s")
        elif self.sock is not None and (
            self.received != self._reported or now - self._last_write >= self.heartbeat_s
        ):
            self._report()
        self.idle.timeout_s = min(self.heartbeat_s, 1.0)
        return work

    def _master_address(self) -> str:
        return self.env.config.ha_master_address or cn.unpack_address(
            cn.load(self.words, cn.MASTER_HA_ADDR)
        )

    def _connect(self, now: float) -> int:
        self._retry_at = now + RETRY_S
        addr = self._master_address()
        if not addr:
            return 0  # not learnt from the namesrv yet
        host, port = parse_host(addr)
        try:
            sock = open_connection(host, port, CONNECT_TIMEOUT_S, self.env.config.tls_client)
        except OSError as exc:
            if addr != self.master:
                log.warning("cannot connect to the master's HA service %s: %s", addr, exc)
                self.master = addr
            return 0
        sock.setblocking(False)
        self.sock, self.master = sock, addr
        self.idle.selector.register(sock, selectors.EVENT_READ, None)
        cn.publish(self.words, cn.HA_CLIENT_ADDR, cn.pack_socket_address(sock.getsockname()))
        self._rlen = 0
        self._last_read = time.monotonic()
        self._report()
        log.info("connected to the master's HA service %s at offset %d", addr, self.received)
        return 1

    def _report(self) -> None:
        try:
            self.sock.send(hf.pack_report(self.received))
        except WOULD_BLOCK:
            return  # the socket is full: the next pass reports
        except OSError as exc:
            self._disconnect(f"report failed: {exc}")
            return
        self._reported = self.received
        self._last_write = time.monotonic()

    def _disconnect(self, why: str) -> None:
        log.warning("HA connection to master %s closed: %s", self.master, why)
        cn.publish(self.words, cn.HA_CLIENT_ADDR, 0)
        self.idle.selector.unregister(self.sock)
        self.sock.close()
        self.sock = None
        self._retry_at = time.monotonic() + RETRY_S
        if self.received != self.whole:  # a partial record: the master sends it again
            self.commitlog.set_write_offset(self.whole, self.max_partial)
            self.received = self.whole

    def _read(self) -> int:
        mv = memoryview(self._rbuf)
        try:
            n = self.sock.recv_into(mv[self._rlen :])
        except WOULD_BLOCK:
            return 0
        except OSError as exc:
            self._disconnect(f"read failed: {exc}")
            return 1
        if n == 0:
            self._disconnect("closed by the master")
            return 1
        self._last_read = time.monotonic()
        self._rlen += n
        try:
            used = self._apply_frames(mv)
        except (HAFrameError, DiskFullError) as exc:
            self._disconnect(str(exc))
            return 1
        except OSError as exc:  # a write to the CommitLog failed: what it received is dropped
            self._disconnect(f"cannot write the CommitLog: {exc}")
            return 1
        rest = self._rlen - used
        if used and rest:
            self._rbuf[:rest] = self._rbuf[used : self._rlen]
        self._rlen = rest
        if self.received != self._reported:  # the ack first: the bytes are in the CommitLog
            self._report()
        self._publish_whole()
        return 1

    def _apply_frames(self, mv: memoryview) -> int:
        """Write every complete batch in the buffer, the batches of one CommitLog file with
        one ``pwritev``; returns the bytes consumed."""
        pos = 0
        max_body = len(self._rbuf) - hf.HEADER_SIZE
        run: list[memoryview] = []  # bodies that follow each other in ``mf`` from ``start``
        mf, start, end = None, 0, 0
        try:
            while self._rlen - pos >= hf.HEADER_SIZE:
                offset, size = hf.parse_header(mv, pos, max_body)
                if self._rlen - pos - hf.HEADER_SIZE < size:
                    break
                target, local = self._place(offset, size)
                if size:
                    if target is not mf or local != end:
                        self._write(mf, start, run)
                        mf, start, end, run = target, local, local, []
                    run.append(mv[pos + hf.HEADER_SIZE : pos + hf.HEADER_SIZE + size])
                    end += size
                    self.received = offset + size
                pos += hf.HEADER_SIZE + size
        finally:  # what was checked is written, also when a later batch is refused
            self._write(mf, start, run)
        return pos

    @staticmethod
    def _write(mf, start: int, run: list[memoryview]) -> None:
        if run:
            mf.wrote_position = mf.write_at(start, run)

    def _place(self, offset: int, size: int):
        """Where a batch of ``size`` bytes at ``offset`` goes: ``(file, position in it)``
        (for an empty batch, a heartbeat, only the offset is checked)."""
        if self.received == 0 and offset:  # an empty slave starts where the master says
            if offset % self.file_size:
                raise HAFrameError(f"the master starts an empty slave at {offset}, "
                                    "not at a CommitLog file's start")  # fmt: skip
            self.commitlog.queue.delete_all()  # empty files below it: a gap is not allowed
            self.received = self.whole = offset
        if offset != self.received:
            raise HAFrameError(f"the master sent offset {offset}; the slave's CommitLog "
                                f"ends at {self.received}")  # fmt: skip
        if not size:
            return None, 0
        local = offset % self.file_size
        if local + size > self.file_size:
            raise HAFrameError(f"a batch of {size} bytes at {offset} crosses the end of a "
                                f"CommitLog file of {self.file_size} bytes")  # fmt: skip
        mf = self.commitlog.queue.find_file(offset)
        if mf is None:
            mf = self.commitlog.queue.new_file(offset - local)
        return mf, local

    def _publish_whole(self) -> None:
        """Publish the end of the last whole record received, and wake reput and flush."""
        if self.received == self.whole:
            return
        count, last_ts = 0, 0
        for batch in self.commitlog.scan(self.whole, self.received, rows=self._rows):
            count += batch.rows.shape[0]
            last_ts = int(batch.rows["store_ts"][-1])
        position, _ = self.commitlog.last_scan
        if self.received - position > self.max_partial:
            self.whole = position
            self._disconnect(f"the bytes at {position} are not a CommitLog record")
            return
        self.whole = position
        words = self.words
        if last_ts:
            cn.publish(words, cn.WRITE_TIMESTAMP, last_ts)
        cn.publish(words, cn.MSGS_IN, int(words[cn.MSGS_IN]) + count)
        cn.publish(words, cn.WRITE_OFFSET, position)
        fence()
        self.followers.wake()

    # -- stopping ---------------------------------------------------------------------------

    def drain(self) -> None:
        """Clean stop: nothing is owed (the master sends the rest on the next connect)."""

    def close(self) -> None:
        if self.sock is not None:
            self.idle.selector.unregister(self.sock)
            self.sock.close()
        self.idle.close()
        self.commitlog.close()
        self.followers.close()
        self.sem.close()
