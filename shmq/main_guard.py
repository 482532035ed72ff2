"""The one mistake every script that starts a broker can make: no ``__main__`` guard.

The broker's agents are started with multiprocessing's ``spawn`` method, which runs the
main script again in each new process (as ``__mp_main__``) before the agent starts. A
script that creates ``shmq.EmbeddedBroker`` at its top level would then start a broker in
every agent, each failing, and the user sees hundreds of lines of multiprocessing
tracebacks ending in "writer agent exited with code 1". ``check_main_guard`` finds the
mistake before any process starts and says what to do in one line.
"""

from __future__ import annotations

import ast
import sys
from types import FrameType

from shmq.errors import ConfigError


def _is_main_test(node: ast.expr) -> bool:
    """``__name__ == "__main__"``, either way round."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return False
    if not isinstance(node.ops[0], ast.Eq):
        return False
    sides = (node.left, node.comparators[0])
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(mains) == 1


def _main_module_frame() -> FrameType | None:
    """The frame running the main script's top level, if this call comes from it."""
    main = sys.modules.get("__main__")
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is getattr(main, "__dict__", None) and frame.f_code.co_name == (
            "<module>"
        ):
            return frame
        frame = frame.f_back
    return None


def unguarded_line() -> tuple[str, int] | None:
    """``(script, line)`` when the main script's top level is running this call outside an
    ``if __name__ == "__main__":`` block; None when it is inside one, or when there is no
    script that spawn would run again (an interactive session, ``python -c``, a notebook)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not path.endswith(".py"):
        return None
    frame = _main_module_frame()
    if frame is None:
        return None
    line = frame.f_lineno
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for stmt in tree.body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            if isinstance(stmt, ast.If) and _is_main_test(stmt.test):
                return None
            return path, line
    return None


def check_main_guard(what: str) -> None:
    """Raise ``ConfigError`` naming the script and line when ``what`` (e.g. "a broker") is
    being started from the main script's top level without the guard."""
    found = unguarded_line()
    if found is not None:
        path, line = found
        raise ConfigError(
            f"{path}, line {line}: {what} starts processes with multiprocessing's spawn "
            "method, which runs this script again in each of them; put the code that "
            'starts it under `if __name__ == "__main__":`'
        )
