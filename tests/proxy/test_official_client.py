"""The official RocketMQ 5 Python client (``rocketmq-python-client``, the ``rocketmq5``
extra) against a real broker's proxy: normal, FIFO, delay and transactional messages, the
SimpleConsumer (receive, ack, change invisible duration) and the PushConsumer, plus
README's gRPC example.

The client runs in subprocesses (``official_client.py``, README's ``py`` block), never
in this process: its generated protos register the same protobuf names as shmq's stubs.
Without the client installed the tests skip, saying how to install it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest

from e2e_helpers import ROOT, embedded

pytestmark = pytest.mark.slow

CLIENT = "rocketmq-python-client"
SCRIPT = Path(__file__).with_name("official_client.py")
SCENARIOS = ("normal", "fifo", "delay", "transaction", "invisible", "push")
TOPICS = {"OcNormal": 4, "OcFifo": 4, "OcDelay": 2, "OcTrans": 2, "OcInvisible": 1,
          "OcPush": 2, "TopicTest": 4}  # fmt: skip
README_ENDPOINT = "127.0.0.1:8081"
TIMEOUT_S = 90


def _client_installed() -> None:
    try:
        version(CLIENT)
    except PackageNotFoundError:
        pytest.skip(f"{CLIENT} is not installed: pip install -e '.[rocketmq5]'")


def readme_example() -> str:
    """README's example of the official client (its one ``py`` block: ``python`` blocks
    run in test_readme.py, in shmq's process environment against a remoting broker)."""
    text = Path(ROOT, "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```py\n(.*?)```", text, flags=re.DOTALL)
    return block


def _run(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """The client in a subprocess (killed by ``subprocess.run`` past ``TIMEOUT_S``), its
    log (``~/logs/rocketmq_python``) under ``home``."""
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env=env, cwd=home)  # fmt: skip


def _client_log(home: Path) -> str:
    logs = sorted(home.glob("logs/rocketmq_python/*.log"))
    return logs[0].read_text(errors="replace")[-4000:] if logs else "(no client log)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Iterator[tuple[dict[str, dict[str, Any]], str]]:
    """The scenarios' results by name, and README example's output."""
    _client_installed()
    home = tmp_path_factory.mktemp("official-client")
    conf = {"proxy_enable": True, "grpc_server_port": 0, "transaction_time_out": 1000,
            "transaction_check_interval": 1000}  # fmt: skip
    with embedded(str(home / "store"), **conf) as mq:
        for topic, queues in TOPICS.items():
            mq.create_topic(topic, queues)
        done = _run([str(SCRIPT), mq.grpc_address, *SCENARIOS], home)
        assert done.returncode == 0, f"{done.stderr}\n{_client_log(home)}"
        example = readme_example().replace(README_ENDPOINT, mq.grpc_address)
        shown = _run(["-c", example], home)
        assert shown.returncode == 0, f"{shown.stderr}\n{_client_log(home)}"
    results = {}
    for line in done.stdout.splitlines():
        result = json.loads(line)
        assert "error" not in result, f"{result['error']}\n{_client_log(home)}"
        results[result["scenario"]] = result
    assert sorted(results) == sorted(SCENARIOS)
    yield results, shown.stdout


@pytest.fixture(scope="module")
def results(runs) -> dict[str, dict[str, Any]]:
    return runs[0]


def _ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


def test_normal_messages_each_received_once_and_tags_filtered(results):
    normal = results["normal"]
    wanted = [i for i, _ in enumerate(normal["sent"]) if i % 4]  # tag "A"; the others "B"
    assert sorted(_ids(normal["received"])) == sorted(normal["sent"][i] for i in wanted)
    assert all(m["tag"] == "A" and m["attempt"] == 1 for m in normal["received"])
    assert all(m["keys"] == [m["body"]] for m in normal["received"])
    assert normal["again"] == []  # acked: not delivered again


def test_fifo_messages_in_order_per_message_group(results):
    fifo = results["fifo"]
    assert sorted(_ids(fifo["received"])) == sorted(fifo["sent"])
    for group in "xy":
        bodies = [m["body"] for m in fifo["received"] if m["group"] == group]
        assert bodies == [f"{group}-{i}" for i in range(6)]


def test_delay_message_comes_at_its_time(results):
    delay = results["delay"]
    assert _ids(delay["received"]) == delay["sent"]
    assert delay["received_ms"] >= delay["deliver_ms"]


def test_transactions_commit_rollback_and_check_back(results):
    transaction = results["transaction"]
    assert sorted(m["body"] for m in transaction["received"]) == ["check", "commit"]
    assert transaction["checked"] == ["check"]  # only the open half was checked back


def test_changed_invisible_duration_brings_the_message_back_once(results):
    invisible = results["invisible"]
    assert _ids(invisible["first"]) == _ids(invisible["second"]) == invisible["sent"]
    assert [m["attempt"] for m in invisible["first"] + invisible["second"]] == [1, 2]
    assert invisible["again"] == []


def test_push_consumer_consumes_everything_and_retries_a_failure(results):
    push = results["push"]
    consumed = push["consumed"]
    assert sorted(set(_ids(consumed))) == sorted(push["sent"])
    fail = [m["attempt"] for m in consumed if m["body"] == "fail"]
    assert fail == [1, 2]
    others = [m["id"] for m in consumed if m["body"] != "fail"]
    assert len(others) == len(set(others))  # none twice


def test_readme_example_sends_and_receives(runs):
    _results, output = runs
    assert "received b'hello over gRPC'" in output
