"""README.md's "Configuration reference" is what the config classes render, so it cannot drift."""

from __future__ import annotations

import os
import re

from e2e_helpers import ROOT
from shmq.broker.config.reference import HEADING, REGENERATE, main, readme_section, render

README = os.path.join(ROOT, "README.md")


def test_the_readme_reference_is_rendered_from_the_config_classes():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    section = readme_section(text)
    assert section is not None, f"README.md has no {HEADING!r} section"
    assert section.rstrip("\n") == render().rstrip("\n"), (
        f"README.md's configuration reference differs from the config classes: run `{REGENERATE}`"
    )
    level_2 = re.findall(r"^## .*", text[: text.index(HEADING)], flags=re.M)
    assert level_2[-1] == "## Running a broker", "the reference follows 'Running a broker'"


def test_the_reference_does_not_depend_on_the_host():
    text = render()
    assert os.path.expanduser("~") not in text  # the store root's default is shown as ~
    assert "| `brokerNmae`" not in text and "| `aclEnable` | `false` |" in text
    assert "- `sendMessageThreadPoolNums`, " in text and "`storePathCommitLog`" in text


def test_write_replaces_only_the_section(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        f"# x\n\n## Running a broker\n\nrun\n\n{HEADING}\n\nstale\n\n## Next\n\nend\n"
    )
    assert main(["--write", str(readme)]) == 0
    assert (
        readme.read_text() == f"# x\n\n## Running a broker\n\nrun\n\n{render()}\n## Next\n\nend\n"
    )
    readme.write_text("# no section\n")
    assert main(["--write", str(readme)]) == 1
