"""The ``shmq`` command: global options, store-demo end to end, errors, lazy imports."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner
from shmq_cli.main import COMMANDS, cli

from shmq import __version__


def test_help_lists_commands() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: shmq" in result.output
    for name in COMMANDS:
        assert name in result.output


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"shmq, version {__version__}"


def test_store_demo_small_run_prints_results(tmp_path) -> None:
    store = tmp_path / "store"
    result = CliRunner().invoke(
        cli, ["store-demo", "--count", "2000", "--size", "50", "--store", str(store)]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "store-demo results" in out
    assert "append (put_batch)" in out
    assert "2,000 msgs" in out
    assert "ok: 2,000 of 2,000 messages read back and verified" in out
    assert (store / "commitlog").is_dir()  # --store keeps the directory


def test_store_demo_twice_on_one_store(tmp_path) -> None:
    args = ["store-demo", "--count", "300", "--size", "20", "--queues", "2"]
    args += ["--store", str(tmp_path / "store")]
    for _ in range(2):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "ok: 300 of 300" in result.stdout


def test_invalid_option_value_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["store-demo", "--count", "0"])
    assert result.exit_code == 2
    assert "Invalid value for '--count'" in result.output


def test_unknown_option_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["store-demo", "--bogus"])
    assert result.exit_code == 2
    assert "No such option" in result.output
    assert "--bogus" in result.output


def test_store_error_is_one_line_and_exit_1() -> None:
    result = CliRunner().invoke(cli, ["store-demo", "--count", "10", "--topic", "bad topic!"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: topic 'bad topic!' is invalid")
    assert "Traceback" not in result.output


def test_help_does_not_import_numba() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from shmq_cli.main import cli\n"
        "r = CliRunner().invoke(cli, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "r = CliRunner().invoke(cli, ['store-demo', '--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'numpy')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
