"""fastjson 1.x's JSON dialect, as RocketMQ's ``RemotingSerializable.encode()`` writes it.

fastjson writes a ``Map`` whose keys are not strings with the keys as they are: numbers
bare (``{0:"127.0.0.1:10911"}``, a ``BrokerData``'s broker ids) and objects as JSON
objects (``{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":7,...}}``, a
``TopicStatsTable``'s ``Map<MessageQueue, TopicOffset>``). Neither is JSON, so Python's
``json`` can read none of it. This module writes and reads that dialect:

* ``dumps``: compact text; ``str`` keys quoted, ``int`` keys bare, ``ObjectKey`` keys as
  objects; ``None`` values in a map left out (fastjson's default).
* ``loads``: plain JSON at C speed; otherwise a small parser that takes bare number keys and
  object keys (an object key comes back as an ``ObjectKey``, which is hashable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from json.decoder import scanstring
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_SPACE = re.compile(r"[ \t\n\r]*")
_INT = re.compile(r"-?[0-9]+")
_LITERALS = {"true": True, "false": False, "null": None}


class ObjectKey(tuple):
    """A map key that is an object (``MessageQueue``): its ``(name, value)`` pairs, in
    the order written. Hashable; nested objects are ``ObjectKey``\\ s, arrays tuples."""

    __slots__ = ()

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> ObjectKey:
        return cls((str(k), _frozen(v)) for k, v in fields.items())

    def as_dict(self) -> dict[str, Any]:
        return dict(self)

    def __repr__(self) -> str:
        return f"ObjectKey({self.as_dict()!r})"


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return ObjectKey.of(value)
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


# -- writing ------------------------------------------------------------------------------------


def dumps(obj: Any, *, pretty: bool = False) -> str:
    """``obj`` as fastjson's compact text (see the module docstring), or with ``pretty`` as
    its ``PrettyFormat`` that RocketMQ's config files use: tabs, map keys sorted (integers
    numerically, before strings)."""
    out: list[str] = []
    _dump(obj, out, 0 if pretty else None)
    return "".join(out)


def _dump(obj: Any, out: list[str], depth: int | None) -> None:
    """Compact when ``depth`` is None, else pretty at nesting ``depth``."""
    if isinstance(obj, ObjectKey):
        obj = obj.as_dict()
    if isinstance(obj, Mapping):
        items = [(k, v) for k, v in obj.items() if v is not None]
        if depth is not None:
            items.sort(key=lambda kv: _sort_key(kv[0]))
        _dump_items(items, "{}", out, depth, keyed=True)
    elif isinstance(obj, list | tuple | set | frozenset):
        _dump_items([(None, v) for v in obj], "[]", out, depth, keyed=False)
    else:
        out.append(json.dumps(obj, ensure_ascii=False, allow_nan=False))


def _dump_items(
    items: list[tuple[Any, Any]], brackets: str, out: list[str], depth: int | None, keyed: bool
) -> None:
    if not items:
        out.append(brackets)
        return
    inner = "" if depth is None else "\n" + "\t" * (depth + 1)
    deeper = None if depth is None else depth + 1
    out.append(brackets[0])
    for i, (key, value) in enumerate(items):
        out.append(("," if i else "") + inner)
        if keyed:
            _dump_key(key, out)
            out.append(":")
        _dump(value, out, deeper)
    out.append(("" if depth is None else "\n" + "\t" * depth) + brackets[1])


def _sort_key(key: Any) -> tuple[int, Any]:
    if isinstance(key, int) and not isinstance(key, bool):
        return (0, key)
    return (1, key) if isinstance(key, str) else (2, repr(key))


def _dump_key(key: Any, out: list[str]) -> None:
    if isinstance(key, str):
        out.append(json.dumps(key, ensure_ascii=False))
    elif isinstance(key, int) and not isinstance(key, bool):
        out.append(str(key))
    elif isinstance(key, ObjectKey):
        _dump(key, out, None)
    else:
        raise TypeError(f"map key {key!r} is a {type(key).__name__}, not a str, int or ObjectKey")


# -- reading ------------------------------------------------------------------------------------


def loads(text: str | bytes, *, bare_int_keys: bool = False, int_keys: bool = False) -> Any:
    """Parse fastjson text or plain JSON (``ValueError`` when it is neither).

    A bare number key comes back as its text (``"0"``, as if it had been quoted), or as an
    ``int`` with ``bare_int_keys``; ``int_keys`` turns every key made only of digits, quoted
    or not, into an ``int``. An object key comes back as an ``ObjectKey``.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if not int_keys:
        try:
            return json.loads(text)
        except ValueError:
            pass
    parser = _Parser(text, bare_int_keys or int_keys, int_keys)
    value = parser.value()
    parser.skip()
    if parser.pos != len(text):
        parser.fail("extra data")
    return value


class _Parser:
    def __init__(self, text: str, bare_int_keys: bool, int_keys: bool) -> None:
        self.text = text
        self.pos = 0
        self.bare_int_keys = bare_int_keys
        self.int_keys = int_keys

    def fail(self, what: str) -> None:
        near = self.text[self.pos : self.pos + 40]
        raise ValueError(f"not fastjson text: {what} at char {self.pos}: {near!r}")

    def skip(self) -> None:
        self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos : self.pos + 1]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            self.fail(f"expected {char!r}")
        self.pos += 1

    def value(self) -> Any:
        char = self.peek()
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        if char == '"':
            text, self.pos = scanstring(self.text, self.pos + 1)
            return text
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal
        m = _NUMBER.match(self.text, self.pos)
        if m is None:
            self.fail("expected a value")
        self.pos = m.end()  # type: ignore[union-attr]
        return float(m.group(0)) if m.group(1) or m.group(2) else int(m.group(0))  # type: ignore[union-attr]

    def key(self) -> Any:
        char = self.peek()
        if char == "{":
            return ObjectKey.of(self.object())
        if char == '"':
            text, self.pos = scanstring(self.text, self.pos + 1)
            return int(text) if self.int_keys and _INT.fullmatch(text) else text
        m = _NUMBER.match(self.text, self.pos)
        if m is None or m.group(1) or m.group(2):
            self.fail("expected a map key")
        self.pos = m.end()  # type: ignore[union-attr]
        return int(m.group(0)) if self.bare_int_keys else m.group(0)  # type: ignore[union-attr]

    def object(self) -> dict[Any, Any]:
        self.expect("{")
        out: dict[Any, Any] = {}
        if self.peek() == "}":
            self.pos += 1
            return out
        while True:
            key = self.key()
            self.expect(":")
            out[key] = self.value()
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            return out

    def array(self) -> list[Any]:
        self.expect("[")
        out: list[Any] = []
        if self.peek() == "]":
            self.pos += 1
            return out
        while True:
            out.append(self.value())
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("]")
            return out
