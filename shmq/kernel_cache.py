"""Where numba keeps shmq's compiled kernels, and when they are stale.

numba's own ``cache=True`` writes beside the sources (``__pycache__`` in site-packages) and
names a cache after the absolute path of the source directory. The first broke installs:
pip does not own those files, so after ``pip install .`` and a later ``pip install -e .``
the leftover ``site-packages/shmq/**/__pycache__`` made ``shmq`` a namespace package that
hid the real one. The second made every reinstall, even of the same sources in another
place, compile everything again.

So shmq's kernels are cached in a user cache directory (``kernel_dir``), in a folder named
after ``fingerprint()`` (``sources_dir``), under their path inside the package: a hash of
the sources of every module that defines a kernel and of every shmq module those import.
The same sources installed anywhere load the same cache; a change to any of them compiles
all kernels again, also those whose own file did not change (numba alone would keep a
kernel whose callee or global constant in another module changed). Two installs of
different sources on one host (a release and a clone, two worktrees) each keep their own
folder rather than overwriting each other's kernels at every start; the least recently
completed folders beyond ``KEEP_SOURCES`` are removed.

``is_warm`` tells whether the kernels for these sources, this numba and this CPU have been
compiled in full (``mark_warm`` after a complete warm-up), so a start can say whether it is
compiling (tens of seconds) or loading (a fraction of one). This module does not import
numba (a warm start need not); ``shmq.codec.kernel_locator`` is numba's side of it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import sys
from importlib.metadata import version

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
ENV_CACHE_DIR = "SHMQ_CACHE_DIR"
KEEP_SOURCES = 4  # folders of kernels of other sources kept beside the current one
_IMPORT = re.compile(
    r"^\s*(?:from\s+(shmq(?:\.\w+)*)\s+import\s+\(?([\w\s,]+)\)?|import\s+(shmq(?:\.\w+)*))",
    re.M,
)


def kernel_dir() -> str:
    """``$SHMQ_CACHE_DIR/kernels``; else ``$NUMBA_CACHE_DIR/shmq`` (numba's own setting,
    which the broker's ``[tuning] numba_cache_dir`` sets); else
    ``${XDG_CACHE_HOME:-~/.cache}/shmq/kernels``."""
    own = os.environ.get(ENV_CACHE_DIR)
    if own:
        return os.path.join(os.path.expanduser(own), "kernels")
    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    if numba_dir:
        return os.path.join(os.path.expanduser(numba_dir), "shmq")
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "shmq", "kernels")


def _module_path(name: str, root: str) -> str | None:
    base = os.path.join(root, *name.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def _imported_paths(source: str, root: str) -> set[str]:
    """The files under ``root`` of the shmq modules ``source`` imports (``from shmq.x import
    y`` counts ``shmq.x`` and, where it is a module, ``shmq.x.y``)."""
    names = []
    for m in _IMPORT.finditer(source):
        if m.group(3):
            names.append(m.group(3))
            continue
        names.append(m.group(1))
        for item in m.group(2).replace("\n", ",").split(","):
            item = item.split(" as ")[0].strip()
            if item:
                names.append(f"{m.group(1)}.{item}")
    return {p for p in (_module_path(name, root) for name in names) if p is not None}


@functools.cache
def fingerprint() -> str:
    """``package_fingerprint`` of the installed package, computed once per process."""
    return package_fingerprint(PACKAGE_DIR)


def package_fingerprint(package_dir: str) -> str:
    """sha256 over the sources of the modules that define kernels (``@njit``) and of the
    shmq modules they import, by their path inside ``package_dir``: what a kernel's compiled
    code can depend on (its callees, the constants it froze in)."""
    sources = {}
    for folder, _, names in os.walk(package_dir):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    sources[path] = f.read()
    kernels = {path for path, text in sources.items() if "@njit" in text}
    covered = set(kernels)
    for path in kernels:
        covered |= _imported_paths(sources[path], os.path.dirname(package_dir))
    digest = hashlib.sha256()
    for path in sorted(covered):
        digest.update(os.path.relpath(path, package_dir).encode())
        digest.update(b"\0")
        digest.update(sources[path].encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _cpu() -> str:
    """The machine and CPU model: numba compiles for the host CPU, so a cache made on
    another (a home directory shared between hosts) is compiled again."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features")):
                    model += line
                if line.strip() == "":
                    break
    except OSError:
        pass
    return f"{platform.machine()}:{hashlib.sha256(model.encode()).hexdigest()[:16]}"


def sources_dir() -> str:
    """Where the kernels of these sources are cached: ``kernel_dir``/the fingerprint."""
    return os.path.join(kernel_dir(), fingerprint()[:24])


def _marker() -> str:
    key = "\0".join((version("numba"), sys.version, _cpu()))
    return os.path.join(sources_dir(), "warm-" + hashlib.sha256(key.encode()).hexdigest()[:24])


def is_warm() -> bool:
    """Every kernel of these sources was compiled into ``sources_dir`` for this numba,
    Python and CPU (``mark_warm``)."""
    return os.path.exists(_marker())


def mark_warm() -> None:
    """Record that a warm-up compiled every kernel (see ``is_warm``), and remove the
    kernels of other sources beyond the ``KEEP_SOURCES`` most recently completed."""
    os.makedirs(sources_dir(), exist_ok=True)
    with open(_marker(), "w", encoding="utf-8") as f:
        f.write(fingerprint() + "\n")
    os.utime(sources_dir())
    others = []
    for entry in os.scandir(kernel_dir()):
        if entry.is_dir(follow_symlinks=False) and entry.path != sources_dir():
            others.append((entry.stat(follow_symlinks=False).st_mtime, entry.path))
    for _, path in sorted(others, reverse=True)[KEEP_SOURCES:]:
        shutil.rmtree(path, ignore_errors=True)
