"""Fixtures for the tuning tests: a fake host tree and a clean runtime environment."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tune_tree

from tune_tree import build


@pytest.fixture(autouse=True)
def _no_runtime_env(monkeypatch):
    """The runtime rows read NUMBA_*/PYTHONMALLOC from the environment: start without."""
    for key in ("NUMBA_CACHE_DIR", "NUMBA_THREADING_LAYER", "PYTHONMALLOC"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    path.mkdir()
    return path


@pytest.fixture
def fake_root(tmp_path, store):
    """``make(**kw)`` builds a fake tree (see ``tune_tree.build``) and returns its root."""

    def make(**kw):
        return build(tmp_path / "root", store, **kw)

    return make
