"""The shmq command line: help, version, the store demo, and errors as one-line messages."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from click.testing import CliRunner

from shmq import __version__
from shmq_cli.main import COMMANDS, cli


def test_help_and_version():
    runner = CliRunner()
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0 and "store-demo" in result.output
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_store_demo_runs_and_reports(tmp_path):
    store = tmp_path / "demo"
    result = CliRunner().invoke(
        cli, ["store-demo", "--store", str(store), "--count", "3000", "--size", "50"]
    )
    assert result.exit_code == 0, result.output
    assert "3,000 msgs ok" in result.output
    assert "query by key" in result.output and "found" in result.output
    assert (store / "commitlog").is_dir()  # an explicit --store is kept


def test_store_demo_bad_input_exits_non_zero(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["store-demo", "--count", "0"])
    assert result.exit_code == 2 and "count" in result.output.lower()
    result = runner.invoke(cli, ["store-demo", "--topic", "bad topic", "--count", "10"])
    assert result.exit_code == 1
    assert "topic 'bad topic' is invalid" in result.output
    assert "Traceback" not in result.output


def test_locked_store_is_a_clear_error(tmp_path):
    from shmq.store import MessageStore

    with MessageStore.open(tmp_path / "s", mapped_file_size_commit_log=1 << 16):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        out = subprocess.run(
            [sys.executable, "-m", "shmq_cli.main", "store-demo", "--store", str(tmp_path / "s"),
             "--count", "10"],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
    assert out.returncode == 1
    assert "locked by another process" in out.stderr
    assert "Traceback" not in out.stderr


def test_help_lists_every_registered_command():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: shmq" in result.output
    for name in COMMANDS:
        assert name in result.output


def test_store_demo_prints_table_and_stats(tmp_path):
    result = CliRunner().invoke(
        cli, ["store-demo", "--count", "2000", "--size", "50", "--store", str(tmp_path / "s")]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "store-demo results" in out and "append (put_batch)" in out
    assert "store stats" in out and "messages_put" in out
    assert "ok: 2,000 of 2,000 messages read back and verified" in out


def test_store_demo_twice_on_one_store(tmp_path):
    args = ["store-demo", "--count", "300", "--size", "20", "--queues", "2"]
    args += ["--store", str(tmp_path / "store")]
    for _ in range(2):  # the second run reads only its own messages and finds its own key
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "ok: 300 of 300" in result.stdout


def test_unknown_option_is_a_usage_error():
    result = CliRunner().invoke(cli, ["store-demo", "--bogus"])
    assert result.exit_code == 2
    assert "No such option" in result.output and "--bogus" in result.output


def test_store_error_is_one_line_on_stderr():
    result = CliRunner().invoke(cli, ["store-demo", "--count", "10", "--topic", "bad topic!"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: topic 'bad topic!'")


def test_help_imports_no_numba():
    """Commands import kernels lazily: --help (of the group and of a command) stays fast."""
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from shmq_cli.main import cli\n"
        "for args in (['--help'], ['store-demo', '--help']):\n"
        "    r = CliRunner().invoke(cli, args)\n"
        "    assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'numpy')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_stop_suggests_only_options_that_exist(tmp_path):
    """``shmq stop`` on a store where nothing runs says what to try: each option it names
    belongs to ``stop``, or to the ``shmq COMMAND`` quoted around it."""
    runner = CliRunner()
    result = runner.invoke(cli, ["stop", "--store", str(tmp_path)])
    assert result.exit_code == 1 and "not running" in result.stderr, result.output
    quoted = re.findall(r"`shmq (\w+) ([^`]*)`", result.stderr)
    named = [("stop", o) for o in re.findall(r"--[\w-]+", re.sub(r"`[^`]*`", "", result.stderr))]
    named += [(command, o) for command, rest in quoted for o in re.findall(r"--[\w-]+", rest)]
    assert ("stop", "--store") in named
    for command, option in named:
        assert option in runner.invoke(cli, [command, "--help"]).output, (command, option)
