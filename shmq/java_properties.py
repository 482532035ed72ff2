"""Java ``Properties`` text, the format of RocketMQ's ``broker.conf`` and of the broker
config that GET_BROKER_CONFIG answers: read (``parse_properties``) and written
(``escape`` a value)."""

from __future__ import annotations

import re

from shmq.errors import ConfigError


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` syntax: ``key=value``, ``key: value`` or ``key value``;
    ``#`` and ``!`` comment lines; a line ending in an odd number of backslashes continues
    on the next (its leading whitespace dropped); ``\\t``, ``\\n``, ``\\uXXXX`` and ``\\x``
    escapes. Keys and values are trimmed; a later duplicate wins."""
    out: dict[str, str] = {}
    logical: list[str] = []
    for line in re.split(r"\r\n|\r|\n", text):
        line = line.lstrip(" \t\f")
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            logical.append(line[:-1])
            continue
        logical.append(line)
        key, value = _split_property("".join(logical))
        out[key] = value
        logical = []
    if logical:
        key, value = _split_property("".join(logical))
        out[key] = value
    return out


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line) and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest.rstrip(" \t\f"))


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc[0] == "u":
            if len(esc) != 5:
                raise ConfigError(f"malformed \\uXXXX escape in properties line {text!r}")
            return chr(int(esc[1:], 16))
        return _ESCAPES.get(esc, esc)

    # Two \u escapes may be a surrogate pair (Java writes characters above U+FFFF so).
    joined = re.sub(r"\\(u[0-9a-fA-F]{0,4}|.)", one, text, flags=re.DOTALL)
    return joined.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def escape(text: str) -> str:
    """``text`` as a properties value that ``parse_properties`` (and Java) reads back
    (surrounding whitespace aside: values are trimmed)."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(ch)])
        elif " " <= ch <= "~":
            out.append(ch)
        else:  # Java reads conf files as ISO-8859-1, so anything else is escaped
            units = ch.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[j]:02x}{units[j + 1]:02x}" for j in range(0, len(units), 2))
    return "".join(out)
