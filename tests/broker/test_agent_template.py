"""Agents forked from the agent template (``shmq.broker.agents.template``): a dead one is
forked again, a dead template is replaced together with its agents, and the exit codes the
template reports make a clean stop clean."""

from __future__ import annotations

import os
import signal

from waiting import wait_for

from shmq.client.producer.producer import Producer
from shmq.client.types import SendStatus
from shmq.ipc import counters as cn
from shmq.message import Message


def agent_pids(broker) -> dict[str, int]:
    words = broker.counters.words
    return {kind: cn.load(words, cn.agent_word(kind, cn.PID)) for kind in broker.group.kinds}


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def test_agents_are_forked_from_one_template_and_a_dead_one_again(make_broker):
    broker, namesrv = make_broker()
    first = agent_pids(broker)
    template = parent(first["writer"])
    assert template != os.getpid()
    assert {parent(pid) for pid in first.values()} == {template}
    # each is named for ``top`` and ``ps -o comm``, not one more ``python``
    assert comm(template) == "shmq-template"
    assert {kind: comm(pid) for kind, pid in first.items()} == {
        kind: f"shmq-{kind}" for kind in first
    }
    os.kill(first["writer"], signal.SIGKILL)
    wait_for(lambda: agent_pids(broker)["writer"] not in (0, first["writer"]),
             what="the writer forked again")  # fmt: skip
    assert parent(agent_pids(broker)["writer"]) == template
    assert broker.group.procs["flush"].pid == first["flush"]  # the others ran on
    with Producer("template-p", namesrv) as producer:
        assert producer.send(Message("TemplateT", b"after")).send_status == SendStatus.SEND_OK


def test_a_dead_template_is_replaced_with_its_agents(make_broker):
    broker, namesrv = make_broker()
    first = agent_pids(broker)
    template = parent(first["writer"])
    os.kill(template, signal.SIGKILL)  # its agents get SIGTERM and stop

    def all_new() -> bool:
        now = agent_pids(broker)
        return all(now[k] and now[k] != first[k] for k in now)

    wait_for(all_new, timeout=60, what="every agent forked from a new template")
    assert {parent(pid) for pid in agent_pids(broker).values()} - {template} == {
        parent(agent_pids(broker)["writer"])
    }
    with Producer("template-p2", namesrv) as producer:
        assert producer.send(Message("TemplateT", b"after")).send_status == SendStatus.SEND_OK


def test_agents_stopped_by_sigterm_report_exit_code_zero(make_broker):
    """As a service manager's SIGTERM to the whole group: the template ignores it and reports
    the agents' clean exits, so the broker's stop is clean (it removes ``abort``)."""
    broker, _ = make_broker()
    pids = agent_pids(broker)
    broker.request_stop()
    for pid in (parent(pids["writer"]), *pids.values()):
        os.kill(pid, signal.SIGTERM)
    for kind in pids:
        broker.group.procs[kind].join(30)
    assert {kind: proc.exitcode for kind, proc in broker.group.procs.items()} == dict.fromkeys(
        pids, 0
    )
    broker.stop()
    assert not os.path.exists(os.path.join(broker.root, "abort"))
