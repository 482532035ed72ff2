"""Every Python snippet of README.md runs: against a namesrv and broker this test starts (the
snippets' ``127.0.0.1:9876`` is replaced with its address) and with ``/tmp`` paths moved into
the test's directory. The Spark snippet runs in the Spark tests (it needs a session)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from e2e_helpers import ROOT, cluster, env, shm_entries

README = os.path.join(ROOT, "README.md")


def python_snippets() -> list[str]:
    with open(README, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def local(snippet: str, namesrv: str, tmp) -> str:
    return snippet.replace("127.0.0.1:9876", namesrv).replace("/tmp/", f"{tmp}/")


SNIPPETS = [s for s in python_snippets() if "spark" not in s]


def test_the_readme_has_python_snippets():
    assert len(SNIPPETS) >= 2 and any("spark" in s for s in python_snippets())


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("readme"), defaultTopicQueueNums=4,
                 enablePropertyFilter="true") as c:  # fmt: skip
        yield c
    assert shm_entries() - before == set()


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs(c, tmp_path, index):
    code = local(SNIPPETS[index], c.namesrv, tmp_path)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=180, env=env(), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, f"README snippet {index} failed:\n{code}\n{done.stderr}"
