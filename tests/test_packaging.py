"""What the wheel and the editable install hold: every package of ``shmq/``."""

from __future__ import annotations

import os
import tomllib

from e2e_helpers import ROOT


def test_pyproject_lists_every_package():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {
        os.path.relpath(folder, ROOT).replace(os.sep, ".")
        for folder, _, names in os.walk(os.path.join(ROOT, "shmq"))
        if "__init__.py" in names and "autoregister" not in folder
    }
    assert found - listed == set(), "add these to pyproject.toml's packages"
    assert {"shmq_cli", "shmq_tuning", "pyspark_shmq"} <= listed
