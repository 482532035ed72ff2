"""RocketMQ's ``ConfigManager`` persistence: fastjson-style text, ``.tmp`` / ``.bak`` files.

fastjson pretty-prints with tabs, sorts keys, omits nulls and writes integer map keys bare
(``{0:12}``), which is not strict JSON: ``loads_fastjson`` quotes bare keys before parsing.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# A bare integer key: after "{" or "," (and whitespace), digits, whitespace, ":".
_BARE_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def dumps_fastjson(obj: Any, indent: int = 0) -> str:
    pad = "\t" * (indent + 1)
    if isinstance(obj, dict):
        items = [(k, v) for k, v in obj.items() if v is not None]
        if not items:
            return "{}"
        items.sort(key=lambda kv: str(kv[0]))
        parts = []
        for k, v in items:
            key = str(k) if isinstance(k, int) and not isinstance(k, bool) else json.dumps(str(k))
            parts.append(f"{pad}{key}:{dumps_fastjson(v, indent + 1)}")
        return "{\n" + ",\n".join(parts) + "\n" + "\t" * indent + "}"
    if isinstance(obj, (list, tuple)):
        if not obj:
            return "[]"
        parts = [pad + dumps_fastjson(v, indent + 1) for v in obj]
        return "[\n" + ",\n".join(parts) + "\n" + "\t" * indent + "]"
    return json.dumps(obj, ensure_ascii=False)


def loads_fastjson(text: str) -> Any:
    """Parse fastjson text (bare integer keys come back as ``int``) or plain JSON."""
    out, last = [], 0
    for m in _STRING.finditer(text):  # quote bare keys only outside strings
        out.append(_BARE_KEY.sub(_quote_key, text[last : m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_BARE_KEY.sub(_quote_key, text[last:]))
    return json.loads("".join(out), object_pairs_hook=_int_keys)


def _quote_key(m: re.Match[str]) -> str:
    """A bare integer key, quoted with a NUL marker so ``_int_keys`` turns it back."""
    return f'{m.group(1)}"\\u0000{m.group(2)}"{m.group(3)}'


def _int_keys(pairs: list[tuple[str, Any]]) -> dict:
    return {_key(k): v for k, v in pairs}


def _key(k: str) -> int | str:
    """Bare integer keys were marked with a leading NUL (no config name starts with one)."""
    if k[:1] == "\x00" and k[1:].lstrip("-").isdigit():
        return int(k[1:])
    return k


def persist(path: str, text: str) -> None:
    """Write ``path`` the way ``MixAll.string2File`` does: ``.tmp`` first, the old content
    to ``.bak``, then replace; fsynced so a crash leaves the old or the new file whole."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(path):
        shutil.copyfile(path, path + ".bak")
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load(path: str, parse: Callable[[str], Any] = loads_fastjson) -> Any | None:
    """Parse ``path``; fall back to ``path.bak`` when it is missing, empty or broken."""
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, encoding="utf-8") as f:
                text = f.read()
            if text.strip():
                value = parse(text)
                if candidate != path:
                    log.warning("%s is unreadable: loaded %s", path, candidate)
                return value
        except FileNotFoundError:
            continue
        except ValueError as exc:
            log.warning("%s does not parse: %s", candidate, exc)
    return None
