"""numba's side of ``shmq.kernel_cache``: a cache locator for the functions of the shmq
package, put first among numba's own when ``shmq.codec`` is imported (before any kernel is
defined: every module that defines one imports ``shmq.codec`` first)."""

from __future__ import annotations

import os

from numba.core import caching

from shmq.kernel_cache import PACKAGE_DIR, fingerprint, sources_dir


class KernelLocator(caching._CacheLocator):
    """numba's cache locator for functions defined in the shmq package (see the module
    docstring); numba's own locators serve every other function."""

    def __init__(self, py_func, py_file: str) -> None:
        self._lineno = py_func.__code__.co_firstlineno
        inside = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), PACKAGE_DIR)
        self._cache_path = os.path.join(sources_dir(), "shmq", inside)

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> str:
        return fingerprint()

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file: str) -> KernelLocator | None:
        path = os.path.abspath(py_file)
        if not path.startswith(PACKAGE_DIR + os.sep) or not os.path.isfile(path):
            return None
        locator = cls(py_func, py_file)
        try:
            locator.ensure_cache_path()
        except OSError:  # not writable: numba's own locators take it
            return None
        return locator


def install() -> None:
    """Put ``KernelLocator`` first among numba's locators (idempotent)."""
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
    if KernelLocator not in impl._locator_classes:
        impl._locator_classes = [KernelLocator, *impl._locator_classes]
