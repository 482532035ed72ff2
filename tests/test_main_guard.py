"""A script that starts a broker without ``if __name__ == "__main__":`` gets one line saying
so before any process starts (``shmq.main_guard``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHECK = "from shmq.main_guard import check_main_guard\n"


def _run(tmp_path, body: str) -> subprocess.CompletedProcess:
    path = tmp_path / "script.py"
    path.write_text(CHECK + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        'check_main_guard("a broker")\n',
        'def main():\n    check_main_guard("a broker")\n\nmain()\n',
        'if True:\n    check_main_guard("a broker")\n',
        'if __name__ != "__main__":\n    pass\nelse:\n    check_main_guard("x")\n',
    ],
)
def test_unguarded_top_level_is_refused_naming_the_line(tmp_path, body):
    run = _run(tmp_path, body)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert "script.py, line " in last and 'if __name__ == "__main__":' in last


@pytest.mark.parametrize(
    "body",
    [
        'if __name__ == "__main__":\n    check_main_guard("a broker")\n',
        'def main():\n    check_main_guard("a broker")\n\nif "__main__" == __name__:\n    main()\n',
    ],
)
def test_guarded_code_passes(tmp_path, body):
    run = _run(tmp_path, body)
    assert run.returncode == 0, run.stderr


def test_no_script_no_check():
    run = subprocess.run([sys.executable, "-c", CHECK + 'check_main_guard("a broker")'],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr


def test_an_unguarded_embedded_broker_fails_in_one_line_before_any_agent(tmp_path):
    path = tmp_path / "demo.py"
    path.write_text('import shmq\n\nwith shmq.EmbeddedBroker() as mq:\n    print("up")\n')
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 1
    assert "demo.py, line 3: a broker starts processes" in run.stderr
    assert "agent exited" not in run.stderr and "spawn_main" not in run.stderr
    assert "up" not in run.stdout
