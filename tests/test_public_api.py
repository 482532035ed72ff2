"""The public API: everything users need is exported from ``shmq`` and documented."""

from __future__ import annotations

import enum
import inspect
import subprocess
import sys

import shmq


def test_every_export_resolves_and_every_class_has_an_example():
    missing = []
    for name in shmq.__all__:
        obj = getattr(shmq, name)
        documented = "Example" in (obj.__doc__ or "")
        if inspect.isclass(obj) and not issubclass(obj, (Exception, enum.Enum)) and not documented:
            missing.append(name)
    assert not missing, f"public classes without an example in their docstring: {missing}"
    assert "allocation_strategy" in dir(shmq)
    assert sorted(shmq.__all__) == sorted(shmq._EXPORTS)


def test_unknown_name_is_an_attribute_error():
    try:
        shmq.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_import_shmq_is_light():
    code = "import sys, shmq; print('numpy' in sys.modules, 'numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
