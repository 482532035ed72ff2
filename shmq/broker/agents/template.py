"""The agent template: one process that imports every agent's modules and loads their
numba kernels once, then forks each agent the supervisor asks for.

A spawned agent pays an interpreter start, numpy and numba imports and its kernel cache
loads (≈ 0.5 s of CPU each); six of them started at once on two cores kept a crashed broker
from answering for seconds, and a writer restart took as long as its imports. The template
pays that once, while the supervisor recovers the store, and a forked agent starts in
milliseconds with its kernels in memory.

It stays ``spawn``-safe: the template itself is a ``spawn``ed interpreter that imported only
agent code and ran no thread, so an agent forked from it inherits no supervisor state (no
threads, locks, mappings or sockets), only the modules a spawned agent would have imported.
Its arguments cross a pipe pickled, as ``spawn``'s do.

The template reaps its agents and reports each one's exit code; the supervisor learns of a
death that moment (``AgentTemplate.on_exit``) instead of at its next poll. The template
ignores SIGTERM and SIGINT: it ends when the supervisor says so or dies (its pipe closes);
agents get SIGTERM, their clean stop, when the template dies.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing as mp
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from shmq.broker.config.broker_config import BrokerConfig
from shmq.errors import ShmqError

log = logging.getLogger(__name__)

START_TIMEOUT_S = 300.0  # as the supervisor waits for an agent (a cache that misses compiles)


def preload() -> None:
    """Import every agent's module (a promotion turns a slave's agents into a master's) and
    run the warm-ups that load their kernels from numba's cache."""
    from shmq.broker.agents import (  # noqa: F401  (imported for the forked agents)
        cleaner,
        flush,
        ha_client,
        ha_service,
        reput,
        runner,
        schedule,
        writer,
    )

    writer.warm_up()
    reput.warm_up()
    schedule.warm_up()


def run_template(conn: Connection, log_level: int) -> None:
    """Process entry point of the template (``spawn`` target): preload, say ``ready``, then
    fork an agent per ``(kind, config, prefix)`` request, answering its pid, and report
    ``("exit", pid, exit code)`` for each agent that ends."""
    logging.basicConfig(
        level=log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-7s shmq.template[%(process)d]: %(message)s",
    )
    # the supervisor orders the stop (or its death closes the pipe: no parent-death signal,
    # which would come when the supervisor's thread that spawned this one ends); a SIGTERM
    # to the whole group (a service manager's) stops the agents, and the template stays to
    # report their exit codes
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from shmq.broker.agents.runner import name_process

    name_process("shmq-template")  # each agent it forks takes its own name
    started = time.monotonic()
    gc.disable()  # imports make objects by the hundred thousand: a tenth of the preload
    preload()
    # out of every later collection: an agent's first full collection (tuning's gc freeze)
    # would otherwise walk, and so copy, every page of the heap it shares with the template
    gc.collect()
    gc.freeze()
    gc.enable()
    log.info("agent template ready: preloaded in %.2f s", time.monotonic() - started)
    conn.send(("ready", os.getpid()))
    agents: dict[int, int] = {}  # pidfd → pid
    template = os.getpid()
    while True:
        for ready in wait([conn, *agents]):
            if ready is conn:
                try:
                    request = conn.recv()
                except EOFError:
                    request = None
                if request is None:  # the supervisor is done or dead; agents left die with us
                    return
                kind, config, prefix = request
                pid = os.fork()
                if pid == 0:
                    _run_forked(kind, config, prefix, log_level, template, conn, agents)
                agents[os.pidfd_open(pid)] = pid
                conn.send(("started", pid))
            else:
                pid = agents.pop(ready)
                os.close(ready)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    conn.send(("exit", pid, os.waitstatus_to_exitcode(status)))


def _run_forked(
    kind: str,
    config: BrokerConfig,
    prefix: str,
    log_level: int,
    template: int,
    conn: Connection,
    agents: dict[int, int],
) -> None:
    """The forked agent: drop the template's pipe and pidfds, reseed, run the agent, and
    exit as a spawned process would (0, 1 after an exception, ``SystemExit``'s code), never
    returning into the template's loop."""
    code = 1
    try:
        from shmq.broker.agents.runner import die_with_parent, run_agent

        die_with_parent()
        if os.getppid() != template:  # the template died before the line above
            os._exit(1)
        conn.close()
        for fd in agents:
            os.close(fd)
        random.seed()  # not the template's sequence, shared with every sibling
        run_agent(kind, config, prefix, log_level)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        logging.getLogger("shmq.broker.agents.runner").exception("%s agent failed", kind)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class AgentProcess:
    """The supervisor's handle of a forked agent, what it uses of ``multiprocessing.Process``:
    ``pid``, ``exitcode``, ``is_alive``, ``join``, ``kill``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.exitcode: int | None = None
        self._ended = threading.Event()

    def ended(self, exitcode: int) -> None:
        self.exitcode = exitcode
        self._ended.set()

    def is_alive(self) -> bool:
        return not self._ended.is_set()

    def join(self, timeout: float | None = None) -> None:
        self._ended.wait(timeout)

    def kill(self) -> None:
        if self.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


class _Session:
    """One template process and what the supervisor's reader thread learnt from it."""

    def __init__(self, proc: Any, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.ready = threading.Event()
        self.failed = ""  # why it cannot start agents (it exited)
        self.started: list[AgentProcess] = []  # forked, not yet taken by ``start_agent``
        self.agents: dict[int, AgentProcess] = {}  # pid → its handle, until it ends
        self.answer = threading.Condition()


class AgentTemplate:
    """The supervisor's side: ``spawn`` the template early (it preloads while the store
    recovers), ``start_agent`` forks one, ``close`` at stop. ``on_exit`` runs in the reader
    thread whenever an agent ends."""

    def __init__(self, log_level: int, on_exit: Callable[[], None]) -> None:
        self.log_level = log_level
        self.on_exit = on_exit
        self._session: _Session | None = None
        self._lock = threading.Lock()  # one request at a time: their answers come in order
        self._closed = False

    def spawn(self) -> None:
        """Start the template process (returns at once; it preloads in the background)."""
        ctx = mp.get_context("spawn")
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=run_template, args=(theirs, self.log_level),
                           name="shmq-agent-template", daemon=False)  # fmt: skip
        proc.start()
        theirs.close()
        self._session = session = _Session(proc, ours)
        threading.Thread(target=self._read, args=(session,), name="shmq-agent-template",
                         daemon=True).start()  # fmt: skip

    def start_agent(self, kind: str, config: BrokerConfig, prefix: str) -> AgentProcess:
        """Fork the ``kind`` agent from the template (spawned again if it died)."""
        with self._lock:
            if self._closed:  # a death seen while the broker stops: no new template
                raise ShmqError(f"the broker is stopping: the {kind} agent is not started")
            session = self._session
            if session is None or session.failed or not session.proc.is_alive():
                if session is not None:
                    log.error("the agent template (pid %s) died: starting another",
                              session.proc.pid)  # fmt: skip
                self.spawn()
                session = self._session
            if not session.ready.wait(START_TIMEOUT_S) or session.failed:
                raise ShmqError(f"the agent template did not start ({session.failed or 'timeout'})")
            with session.answer:
                try:
                    session.conn.send((kind, config, prefix))
                except OSError as exc:
                    raise ShmqError(f"the agent template is gone: {exc}") from None
                if not session.answer.wait_for(lambda: session.started or session.failed,
                                               START_TIMEOUT_S):  # fmt: skip
                    raise ShmqError(f"the agent template did not start the {kind} agent")
                if not session.started:
                    raise ShmqError(f"the agent template {session.failed}")
                return session.started.pop(0)

    def _read(self, session: _Session) -> None:
        """The template's messages: ready, each agent started, each agent's exit."""
        try:
            while True:
                message = session.conn.recv()
                if message[0] == "ready":
                    session.ready.set()
                elif message[0] == "started":
                    with session.answer:
                        agent = session.agents[message[1]] = AgentProcess(message[1])
                        session.started.append(agent)
                        session.answer.notify_all()
                else:
                    agent = session.agents.pop(message[1], None)
                    if agent is not None:
                        agent.ended(message[2])
                    self.on_exit()
        except (EOFError, OSError):
            pass
        with session.answer:
            session.failed = "exited"
            session.ready.set()
            session.answer.notify_all()
        session.conn.close()
        self._orphans_ended(session.agents)

    def _orphans_ended(self, agents: dict[int, AgentProcess]) -> None:
        """The template exited: the agents it leaves got their parent-death SIGTERM and
        stop; each counts as ended once it is gone (its exit code unknown: -SIGTERM)."""
        fds = {}
        for pid, agent in agents.items():
            try:
                fds[os.pidfd_open(pid)] = agent
            except ProcessLookupError:
                agent.ended(-signal.SIGTERM)
        while fds:
            for fd in wait(list(fds)):
                fds.pop(fd).ended(-signal.SIGTERM)
                os.close(fd)
        if agents:
            self.on_exit()

    def close(self) -> None:
        """Stop the template, after the agents (any left get their parent-death SIGTERM)."""
        with self._lock:
            self._closed = True
            session, self._session = self._session, None
        if session is None:
            return
        with contextlib.suppress(OSError):
            session.conn.send(None)  # the template returns; the reader sees its pipe close
        session.proc.join(5)
        if session.proc.is_alive():
            session.proc.kill()
            session.proc.join(5)
