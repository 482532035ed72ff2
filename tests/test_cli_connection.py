"""The credential and TLS options of ``shmq produce``, ``shmq consume`` and ``shmq admin``
reach the client each command opens (given as options or in the environment), and the
secret key is never printed."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from shmq.errors import ShmqError
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions
from shmq_cli.main import cli

SECRET = "cli-secret-not-shown"


class Opened(ShmqError):
    """Raised by the stand-in client once it has noted how it was made."""


@pytest.fixture
def opened(monkeypatch):
    """Stand-ins for the clients the commands open: each notes its keyword arguments in
    the returned list and fails, which ends the command with ``error: ...``."""
    made: list[dict] = []

    def stand_in(*args, **kwargs):
        made.append(kwargs)
        raise Opened("stand-in client")

    import shmq.client.admin.admin as admin
    import shmq.client.consumer.pop.simple as simple
    import shmq.client.producer.producer as producer
    import shmq.client.transport.queue_reader as queue_reader

    monkeypatch.setattr(admin, "Admin", stand_in)
    monkeypatch.setattr(producer, "Producer", stand_in)
    monkeypatch.setattr(queue_reader, "QueueReader", stand_in)
    monkeypatch.setattr(simple, "SimpleConsumer", stand_in)
    return made


def run(args: list[str], env: dict[str, str] | None = None):
    """``shmq args``, with the credentials' variables unset unless ``env`` sets them."""
    env = {"SHMQ_ACCESS_KEY": "", "SHMQ_SECRET_KEY": "", **(env or {})}
    result = CliRunner().invoke(cli, args, env=env)
    assert SECRET not in result.output
    return result


COMMANDS = [
    ["produce", "-t", "T", "--body", "b"],
    ["consume", "-t", "T"],
    ["consume", "-t", "T", "--pop"],
    ["admin", "topic-list"],
    ["admin", "update-topic", "-t", "T"],
    ["admin", "consumer-progress", "-g", "G"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_options_reach_the_client(command, opened, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not read here")
    result = run([*command, "--access-key", "AK", "--secret-key", SECRET, "--tls-ca", str(ca)])
    assert "error: stand-in client" in result.output, result.output
    assert opened[-1]["credentials"] == Credentials("AK", SECRET)
    assert opened[-1]["tls"] == TlsOptions(ca_file=str(ca))


def test_environment_variables_and_defaults(opened):
    env = {"SHMQ_ACCESS_KEY": "AK-env", "SHMQ_SECRET_KEY": SECRET}
    run(["admin", "topic-list", "--tls"], env=env)
    assert opened[-1] == {"credentials": Credentials("AK-env", SECRET), "tls": TlsOptions()}
    run(["produce", "-t", "T", "--body", "b"])
    assert opened[-1] == {"credentials": None, "tls": None}


@pytest.mark.parametrize(
    ("args", "env", "complaint"),
    [
        (["--access-key", "AK"], {}, "--access-key and --secret-key"),
        ([], {"SHMQ_SECRET_KEY": SECRET}, "--access-key and --secret-key"),
        (["--tls-key", "{key}"], {}, "--tls-key needs --tls-cert"),
    ],
)
def test_incomplete_options_are_usage_errors(args, env, complaint, opened, tmp_path):
    key = tmp_path / "key.pem"
    key.write_text("")
    args = [a.format(key=key) for a in args]
    result = run(["admin", "topic-list", *args], env=env)
    assert result.exit_code == 2 and complaint in result.output and not opened


def test_help_names_the_variables_and_hides_the_secret():
    result = run(["admin", "topic-list", "--help"], env={"SHMQ_SECRET_KEY": SECRET})
    assert "SHMQ_ACCESS_KEY" in result.output and "SHMQ_SECRET_KEY" in result.output
