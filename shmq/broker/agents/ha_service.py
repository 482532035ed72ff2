"""The master's HA agent (RocketMQ 4.9's ``HAService`` / ``HAConnection``): streams the
CommitLog to slaves and publishes how far they acknowledged it.

One process serves every slave connection with non-blocking sockets and one selector, so a
slow slave (its socket buffer full) holds up nobody: its unsent rest waits for the socket
to become writable. Each connection starts where the slave's first 8-byte report says (0:
at the start of the master's last CommitLog file) and then receives batches of at most
``haTransferBatchSize`` bytes, each within one CommitLog file, read straight from the
mapped files up to the writer's published write offset, plus an empty heartbeat batch after
``haSendHeartbeatInterval`` without one. A slave that is behind gets batch after batch
without waiting (as RocketMQ's transfer loop sends them): up to ``GATHER_BYTES`` of batches
go out in one ``sendmsg`` of views of the mapped files, so a burst costs one system call
per ``GATHER_BYTES``, not one per batch. The writer posts this agent when it publishes new
bytes and the agent parks, so it sleeps in ``select`` (``socket_idle``) and never polls.
An ASYNC_MASTER's agent lingers ``ASYNC_LINGER_S`` after a pass with work (no producer waits
for its acks): a writer publishing a little at a time then wakes it at most once per linger,
not once per write pass, and each batch carries what accumulated. A SYNC_MASTER's agent
never lingers: its producers wait for the slave's ack.

Every report is an ack: the largest one is published as ``CONFIRMED_OFFSET`` (RocketMQ
4.9's ``push2SlaveMaxOffset``: one slave's ack is enough), and the producers a SYNC_MASTER
keeps waiting on it are woken. A SYNC_MASTER in controller mode counts the acks of its sync
state set instead (``ha_table``'s ``ALL_MEMBERS``, kept by the supervisor's
``sync_state``): the smallest ack of its member connections, and none while a member is not
connected, so every member holds every acknowledged send (RocketMQ 5's
allAckInSyncStateSet). A connection ends, with a log line naming why, when the slave is
silent for ``haHousekeepingInterval``, reports an offset ahead of the master or beyond what
it was sent, or sends bytes that are not reports.

The HA port follows the broker's ``tlsServerMode`` as the control port does (shmq's
addition: RocketMQ's HA port is plain TCP): a new connection's first byte tells TLS from
plain TCP, and a TLS one is handshaken without blocking, in the same selector loop, before
its first report. An SSL socket cannot ``sendmsg`` views, so its batches are joined into one
write, and a write it could not take is offered again unchanged, as TLS requires.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import ssl
import time

from shmq.broker.agents.env import AgentEnv
from shmq.broker.agents.producer_wakeups import ProducerWakeups
from shmq.broker.agents.socket_idle import SocketIdle
from shmq.broker.agents.wakeups import parked_flag
from shmq.codec import ha_frames as hf
from shmq.errors import HAFrameError
from shmq.ipc import counters as cn
from shmq.ipc import ha_table as ht
from shmq.ipc.segment import Segment, fence, open_semaphore
from shmq.remoting.security.tls import WOULD_BLOCK, tls_pending
from shmq.remoting.security.tls_server import TlsGate, TlsRefused
from shmq.store.commitlog import CommitLog

log = logging.getLogger(__name__)

READ_BUFFER = 1 << 20  # RocketMQ's master read buffer
MAX_CONNECTIONS = 64
GATHER_BYTES = 1 << 20  # bytes of batches one sendmsg sends, at most
MAX_GATHER = 256  # batches one sendmsg sends, at most (two buffers each; IOV_MAX is 1024)
LISTEN_RETRY_S = 1.0
ASYNC_LINGER_S = 0.001  # an ASYNC_MASTER agent waits this long after a pass with work


class HAConnection:
    """One slave: its socket, where its transfer stands and what it acknowledged."""

    def __init__(self, sock: socket.socket, addr: tuple[str, int]) -> None:
        self.sock = sock
        self.admitted = False  # its first byte was looked at (and its TLS handshake done)
        self.addr = addr
        self.name = f"{addr[0]}:{addr[1]}"
        # unique on this host across agent restarts: a sync state set names connections
        self.conn_id = time.monotonic_ns()
        self.request_offset = -1  # the first report: where the transfer starts
        self.ack_offset = -1
        self.next_transfer = -1
        self.partial = b""  # a report split across reads
        self.blocked = False  # its socket was full: wait until it is writable
        self.pending = b""  # the unsent rest of a batch the socket took only part of
        now = time.monotonic()
        self.last_read = self.last_write = now
        self.connected_ms = self.caught_up_ms = int(time.time() * 1000)

    def packed_addr(self) -> int:
        return cn.pack_socket_address(self.addr)


class HAService:
    def __init__(self, env: AgentEnv) -> None:
        self.env = env
        cfg = env.config
        store = cfg.store
        self.words = env.words
        self.file_size = store.mapped_file_size_commit_log
        self.batch = cfg.ha_transfer_batch_size
        self.heartbeat_s = cfg.ha_send_heartbeat_interval / 1000
        self.housekeeping_s = cfg.ha_housekeeping_interval / 1000
        self.sync_flush = store.sync_flush
        self.sync_master = cfg.broker_role == "SYNC_MASTER"
        self.tls = TlsGate(cfg.tls_server)
        self.commitlog = CommitLog(
            os.path.join(store.store_path_root_dir, "commitlog"), self.file_size, readonly=True
        )
        self.table = Segment.attach(env.names.ha_table)
        self.registry = Segment.attach(env.names.registry)
        self.wakeups = ProducerWakeups(self.registry, env.names.prefix, cfg.max_producers)
        self.sem = open_semaphore(env.names.agent_sem("ha"))
        # Parked with no slave connected, the agent waits for a connection only: the writer
        # need not post it at all (cn.AGENT_PARKED is the writer's cue).
        self.idle = SocketIdle(self.sem, parked_flag(self.words, "ha", lambda: bool(self.conns)))
        self.idle.linger_s = 0.0 if self.sync_master else ASYNC_LINGER_S
        self.server: socket.socket | None = None
        self._listen_at = 0.0
        self._listen_failed = False
        self._listen()
        self.conns: dict[int, HAConnection] = {}
        self.confirmed = cn.load(self.words, cn.CONFIRMED_OFFSET)
        self._set_version = -1
        self._all_members: frozenset[int] | None = None  # None: any slave's ack counts
        self._cleaned_to = 0
        self._table_dirty = True
        self._rbuf = bytearray(READ_BUFFER)

    def _listen(self) -> None:
        """Listen on the HA port; its number is published (the supervisor registers it as
        haServerAddr, and a restarted agent binds the same one). A port in use is retried
        every second: the master serves producers meanwhile, without slaves."""
        cfg = self.env.config
        host, port = cfg.broker_ip1, cn.load(self.words, cn.HA_PORT) or cfg.ha_port
        self._listen_at = time.monotonic() + LISTEN_RETRY_S
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((host, port))
            server.listen(MAX_CONNECTIONS)
        except OSError as exc:
            server.close()
            if not self._listen_failed:
                log.error("HA service cannot listen on %s:%d (retrying every %.0f s): %s",
                          host, port, LISTEN_RETRY_S, exc)  # fmt: skip
            self._listen_failed = True
            return
        server.setblocking(False)
        self.server, self._listen_failed = server, False
        self.idle.selector.register(server, selectors.EVENT_READ, None)
        cn.publish(self.words, cn.HA_PORT, server.getsockname()[1])
        log.info("HA service listens on %s:%d", host, server.getsockname()[1])

    # -- the loop ---------------------------------------------------------------------------

    def has_work(self) -> bool:
        write = cn.load(self.words, cn.WRITE_OFFSET)
        return any(
            (not c.blocked and 0 <= c.next_transfer < write) or tls_pending(c.sock)
            for c in self.conns.values()
        )

    def do_work(self) -> int:
        cleaned = cn.load(self.words, cn.MIN_PHYSICAL_OFFSET)
        if cleaned > self._cleaned_to:  # the cleaner deleted files: unmap them
            self._cleaned_to = cleaned
            self.commitlog.queue.release_below(cleaned)
        work = 0
        if self.server is None and time.monotonic() >= self._listen_at:
            self._listen()
        for key, mask in self.idle.ready():
            if key.fileobj is self.server:
                work += self._accept()
                continue
            conn = self.conns.get(key.fileobj.fileno())
            if conn is None:
                continue
            if not conn.admitted:
                work += self._admit(conn)
                continue
            if mask & selectors.EVENT_READ:
                work += self._read(conn)
            if mask & selectors.EVENT_WRITE and conn.sock.fileno() in self.conns and conn.blocked:
                work += self._flush_pending(conn)
        write = cn.load(self.words, cn.WRITE_OFFSET)
        now = time.monotonic()
        for conn in list(self.conns.values()):
            if now - conn.last_read > self.housekeeping_s:
                self._close(conn, f"silent for {self.housekeeping_s:.0f} s")
            elif conn.next_transfer >= 0 and not conn.blocked:
                work += self._transfer(conn, write, now)
        self._publish(write)
        self.idle.timeout_s = min(self.heartbeat_s, self.housekeeping_s, 1.0)
        return work

    def _accept(self) -> int:
        try:
            sock, addr = self.server.accept()
        except BlockingIOError:
            return 0
        if len(self.conns) >= MAX_CONNECTIONS:
            log.warning("HA connection from %s refused: %d slaves connected", addr, MAX_CONNECTIONS)
            sock.close()
            return 1
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = HAConnection(sock, addr)
        self.conns[sock.fileno()] = conn
        self.idle.selector.register(sock, selectors.EVENT_READ, None)
        self._table_dirty = True
        log.info("HA slave %s connected", conn.name)
        return 1

    def _admit(self, conn: HAConnection) -> int:
        """Look at a new connection's first byte, and take a TLS one through its handshake
        (a step each time its socket is ready), per ``tlsServerMode``."""
        try:
            if not isinstance(conn.sock, ssl.SSLSocket):
                first = conn.sock.recv(1, socket.MSG_PEEK)
                if not first:
                    self._close(conn, "closed by the slave")
                    return 1
                if not self.tls.wants_tls(first[0]):
                    conn.admitted = True
                    return 1
                self.idle.selector.unregister(conn.sock)
                conn.sock = self.tls.wrap(conn.sock)  # the same descriptor: the same key
                self.idle.selector.register(conn.sock, selectors.EVENT_READ, None)
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self.idle.selector.modify(conn.sock, selectors.EVENT_READ)
            return 1
        except ssl.SSLWantWriteError:
            self.idle.selector.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
            return 1
        except BlockingIOError:
            return 0
        except (TlsRefused, OSError) as exc:
            self._close(conn, f"refused: {exc}" if isinstance(exc, TlsRefused) else str(exc))
            return 1
        conn.admitted = True
        self.idle.selector.modify(conn.sock, selectors.EVENT_READ)
        log.info("HA slave %s speaks TLS (%s)", conn.name, conn.sock.version())
        return 1

    def _read(self, conn: HAConnection) -> int:
        """Take the slave's reports; the last complete one counts."""
        try:
            n = conn.sock.recv_into(self._rbuf)
        except WOULD_BLOCK:
            return 0
        except OSError as exc:
            self._close(conn, f"read failed: {exc}")
            return 1
        if n == 0:
            self._close(conn, "closed by the slave")
            return 1
        conn.last_read = time.monotonic()
        data = conn.partial + bytes(memoryview(self._rbuf)[:n])
        try:
            offset, used = hf.last_report(data, len(data))
        except HAFrameError as exc:
            self._close(conn, str(exc))
            return 1
        conn.partial = data[used:]
        if offset >= 0:
            self._on_report(conn, offset)
        return 1

    def _on_report(self, conn: HAConnection, offset: int) -> None:
        write = cn.load(self.words, cn.WRITE_OFFSET)
        if offset > write:
            self._close(conn, f"the slave's offset {offset} is ahead of the master's {write} "
                        "(a master that restarted with a shorter log?)")  # fmt: skip
            return
        if conn.request_offset < 0:
            start = offset if offset else write - write % self.file_size
            if start < self.commitlog.min_offset:
                self._close(conn, f"the slave's offset {offset} is below the master's first "
                            f"CommitLog offset {self.commitlog.min_offset}")  # fmt: skip
                return
            conn.request_offset = conn.next_transfer = start
            log.info("HA slave %s reports %d: transfer starts at %d", conn.name, offset, start)
        elif offset > conn.next_transfer:
            self._close(conn, f"the slave acknowledged {offset}, beyond the {conn.next_transfer} "
                        "it was sent")  # fmt: skip
            return
        if offset != conn.ack_offset:
            conn.ack_offset = offset
            self._table_dirty = True
        if offset >= write:
            conn.caught_up_ms = int(time.time() * 1000)

    def _transfer(self, conn: HAConnection, write: int, now: float) -> int:
        """Send batches while the slave's socket takes them; a heartbeat when idle."""
        work = 0
        while conn.next_transfer < write and not conn.blocked:
            frames = self._gather(conn, write)
            if frames is None or not self._send(conn, frames):
                return work + 1
            work += 1
        if not work and not conn.blocked and now - conn.last_write >= self.heartbeat_s:
            self._send(conn, [(conn.next_transfer, hf.pack_header(conn.next_transfer, 0), b"")])
            work += 1
        return work

    def _gather(self, conn: HAConnection, write: int) -> list[tuple[int, bytes, object]] | None:
        """The batches from ``next_transfer`` towards ``write``, as ``(offset, header, view
        of the mapped file)``, at most ``GATHER_BYTES`` in all; None when the connection
        was closed (the offset is not stored any more)."""
        frames = []
        offset = conn.next_transfer
        end = min(write, offset + GATHER_BYTES)
        while offset < end and len(frames) < MAX_GATHER:
            mf = self.commitlog.queue.find_file(offset)
            if mf is None:
                self._close(conn, f"CommitLog offset {offset} is not stored any more")
                return None
            local = offset - mf.file_from_offset
            size = min(self.batch, mf.size - local, end - offset)
            frames.append((offset, hf.pack_header(offset, size), mf.buf[local : local + size]))
            offset += size
        return frames

    def _send(self, conn: HAConnection, frames: list[tuple[int, bytes, object]]) -> bool:
        """Send ``frames`` in one ``sendmsg``; ``next_transfer`` moves past what the socket
        took. When it took part of a batch, the rest is kept (copied, so no view of a
        mapped file outlives this call) and the connection waits until it is writable;
        batches it did not start are gathered again then. False: the connection closed."""
        parts = [part for _, header, body in frames for part in (header, body)]
        try:
            sent = self._write(conn, parts)
        except OSError as exc:
            self._close(conn, f"write failed: {exc}")
            return False
        conn.last_write = time.monotonic()
        for offset, header, body in frames:
            size = len(header) + len(body)
            if sent >= size:
                sent -= size
                conn.next_transfer = offset + len(body)
                continue
            if sent:  # a batch cut by a full socket: its rest goes first
                cut = sent - len(header)
                conn.pending = header[sent:] + bytes(body) if cut < 0 else bytes(body[cut:])
                conn.next_transfer = offset + len(body)
            conn.blocked = True
            self.idle.selector.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
            break
        return True

    def _write(self, conn: HAConnection, parts: list) -> int:
        """The bytes of ``parts`` the socket took. An SSL socket takes a write whole or not
        at all, and one it did not take must be offered again unchanged: it becomes the
        connection's pending rest (so it counts as taken) and the connection waits."""
        if not isinstance(conn.sock, ssl.SSLSocket):
            try:
                return conn.sock.sendmsg(parts)
            except BlockingIOError:
                return 0
        data = b"".join(parts)
        try:
            conn.sock.send(data)
        except WOULD_BLOCK:
            conn.pending = data
            conn.blocked = True
            self.idle.selector.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        return len(data)

    def _flush_pending(self, conn: HAConnection) -> int:
        """The socket is writable again: send the rest of a cut batch, then transfer on."""
        if conn.pending:
            try:
                sent = conn.sock.send(conn.pending)
            except WOULD_BLOCK:
                return 0
            except OSError as exc:
                self._close(conn, f"write failed: {exc}")
                return 1
            conn.pending = conn.pending[sent:]
            conn.last_write = time.monotonic()
            if conn.pending:
                return 1
        conn.blocked = False
        self.idle.selector.modify(conn.sock, selectors.EVENT_READ)
        return 1

    def _close(self, conn: HAConnection, why: str) -> None:
        log.warning("HA connection to slave %s closed: %s", conn.name, why)
        self.conns.pop(conn.sock.fileno(), None)
        self.idle.selector.unregister(conn.sock)
        conn.sock.close()
        self._table_dirty = True

    def _acked(self) -> int:
        """The offset every send below is acknowledged to (-1: none yet): the largest ack,
        or with a sync state set the smallest of its members' (-1 while one is missing)."""
        table = self.table.words
        if table[ht.SET_VERSION] != self._set_version:
            self._set_version, mode, members = ht.read_set(table)
            self._all_members = members if mode == ht.ALL_MEMBERS else None
            table[ht.SET_APPLIED] = self._set_version  # acks count by this set from now on
        members = self._all_members
        if members is None:
            return max((c.ack_offset for c in self.conns.values()), default=-1)
        acks = [c.ack_offset for c in self.conns.values() if c.conn_id in members]
        return min(acks) if members and len(acks) == len(members) else -1

    def _publish(self, write: int) -> None:
        """Counters, the status table, and the SYNC_MASTER producers an ack released."""
        words = self.words
        acked = self._acked()
        if acked > self.confirmed:
            self.confirmed = acked
            cn.publish(words, cn.CONFIRMED_OFFSET, acked)
            fence()
            if self.sync_master:
                self.wakeups.wake(cn.durable_offset(words, self.sync_flush, True))
        if cn.load(words, cn.HA_SLAVES) != len(self.conns):
            cn.publish(words, cn.HA_SLAVES, len(self.conns))
        if self._table_dirty:
            self._table_dirty = False
            rows = [(c.packed_addr(), c.ack_offset, c.caught_up_ms, c.connected_ms, c.conn_id)
                    for c in self.conns.values()]  # fmt: skip
            ht.publish_rows(self.table.words, rows)

    # -- stopping ---------------------------------------------------------------------------

    def drain(self) -> None:
        """Clean stop: nothing is owed (slaves catch up from their own offset next time)."""

    def close(self) -> None:
        for conn in list(self.conns.values()):
            self._close(conn, "the master stops")
        cn.publish(self.words, cn.HA_SLAVES, 0)
        ht.publish_rows(self.table.words, [])
        self.idle.close()
        if self.server is not None:
            self.server.close()
        self.wakeups.close()
        self.commitlog.close()
        self.sem.close()
        self.table.close()
        self.registry.close()
