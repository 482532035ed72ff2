"""The README's two set-up commands, run in order in one fresh virtualenv as a newcomer
does (the quick start, then the test install over it), then `shmq --help` and a script
beside the clone, whose folder is named ``shmq``.

This once broke: the first start wrote numba's cache into ``site-packages/shmq``, which pip
does not own, so after the editable install ``site-packages/shmq`` was left as a namespace
package that hid the real one, and every `shmq` command failed on import. And an editable
install served by setuptools' import hook lost to any folder named ``shmq`` on ``sys.path``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys

import pytest

from e2e_helpers import ROOT

pytestmark = pytest.mark.slow

README_PORTS = (9876, 10911)  # the README's `shmq start` takes the default ports


def _readme_command(pattern: str) -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if re.search(pattern, line)]
    assert len(lines) == 1, f"README.md: expected one command matching {pattern!r}: {lines}"
    return lines[0]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _copy_checkout(dest: str) -> None:
    """The files a clone has (tracked, and new ones not ignored), nothing built or cached."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for rel in filter(None, listed.split("\0")):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)


def _pip_cache() -> str:
    got = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True)
    return got.stdout.decode().strip() if got.returncode == 0 else ""


def test_quick_start_then_test_install_then_shmq_works(tmp_path):
    if shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("needs the git checkout to copy")
    busy = [p for p in README_PORTS if not _port_free(p)]
    if busy:
        pytest.skip(f"the README's commands use ports {README_PORTS}; {busy} are in use here")
    quick_start = _readme_command(r"pip install \. && shmq start")
    test_install = _readme_command(r"pip install -e '\.\[test")
    test_install = test_install.split(" && python -m pytest")[0]  # not the suite itself
    clone = tmp_path / "shmq"  # a folder named shmq beside the user's scripts
    _copy_checkout(str(clone))
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHMQ_", "NUMBA_"))}
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PIP_CACHE_DIR=_pip_cache())
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix)
    )
    venv = clone / ".venv"

    def run(command: str, cwd=clone, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip

    try:
        first = run(quick_start)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        said = first.stdout + first.stderr
        assert "received 100000 messages from Demo" in said, said[-2000:]
        site = next((venv / "lib").glob("python3*/site-packages"))
        cached = [p for p in (site / "shmq").rglob("*") if p.suffix in (".nbi", ".nbc")]
        assert cached == [], f"numba's cache was written into the installed package: {cached}"
        second = run(test_install)
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
        helped = run(f"{venv}/bin/shmq --help")
        assert helped.returncode == 0, helped.stderr
        assert "start" in helped.stdout
        (tmp_path / "script.py").write_text("import shmq\nprint(shmq.PushConsumer.__name__)\n")
        beside = run(f"{venv}/bin/python script.py", cwd=tmp_path)
        assert beside.returncode == 0, beside.stderr
        assert beside.stdout.strip() == "PushConsumer"
    finally:
        if (venv / "bin" / "shmq").exists():
            with contextlib.suppress(subprocess.TimeoutExpired):
                run(f"{venv}/bin/shmq stop", timeout=120)
