"""RocketMQ's ACL address patterns (``RemoteAddressStrategyFactory``): which peer addresses a
``whiteRemoteAddress`` or a ``globalWhiteRemoteAddresses`` entry lets in.

A blank pattern matches nothing; ``*``, ``*.*.*.*`` and ``*:*:*:*:*:*:*:*`` everything;
``192.168.0.{1,2}`` (or an IPv6 address ending in ``{...}``) and ``a,b,c`` a set; a segment
``*`` or ``n-m`` (``10.10.1-5.*``, ``1:2:3:*``) a range on that segment, every later segment
``*``; anything else one address. IPv6 addresses compare expanded. A pattern RocketMQ
refuses raises ``AclConfigError``, so a bad file never loads half-understood.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from shmq.errors import ShmqError

_EVERYTHING = ("*", "*.*.*.*", "*:*:*:*:*:*:*:*")


class AclConfigError(ShmqError):
    """``plain_acl.yml`` (or an ACL admin request) holds something RocketMQ refuses."""


def canonical(address: str) -> str:
    """An IP address as patterns compare it: IPv4 as written normally, IPv6 expanded;
    anything else stripped, as given."""
    text = address.strip()
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return text
    return ip.exploded if ip.version == 6 else str(ip)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip())
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class AddressPattern:
    """One pattern: ``everything``, a set of ``addresses``, or a range: the leading
    segments ``head``, segment ``len(head)`` in ``low..high`` (IPv6: ``v6``)."""

    text: str
    everything: bool = False
    addresses: frozenset[str] = frozenset()
    head: tuple[int, ...] | None = None
    low: int = 0
    high: int = 0
    v6: bool = False

    def matches(self, host: str) -> bool:
        if self.everything:
            return True
        if self.head is None:
            return canonical(host) in self.addresses
        segments = _segments(canonical(host), self.v6)
        n = len(self.head)
        return (segments is not None and tuple(segments[:n]) == self.head
                and self.low <= segments[n] <= self.high)  # fmt: skip


def _segments(address: str, v6: bool) -> list[int] | None:
    """A canonical address's segments as numbers; None when it is not of that family."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if (ip.version == 6) != v6:
        return None
    if v6:
        return [int(s, 16) for s in ip.exploded.split(":")]
    return [int(s) for s in address.split(".")]


def parse_pattern(text: object) -> AddressPattern:
    """The pattern ``text`` (``None`` or blank: one matching nothing)."""
    if text is None:
        return AddressPattern("")
    if not isinstance(text, str):
        raise AclConfigError(f"address pattern {text!r} is not a string")
    pattern = text.strip()
    if not pattern:
        return AddressPattern("")
    if pattern in _EVERYTHING:
        return AddressPattern(pattern, everything=True)
    if pattern.endswith("}"):
        return _braces(pattern)
    if "," in pattern:
        return _set(pattern, [a for a in pattern.split(",") if a.strip()])
    if "*" in pattern or "-" in pattern:
        return _range(pattern)
    return AddressPattern(pattern, addresses=frozenset((canonical(pattern),)))


def _refused(pattern: str, kind: str) -> AclConfigError:
    return AclConfigError(f"{kind} netaddress examine scope Exception netaddress is {pattern}")


def _set(pattern: str, addresses: list[str]) -> AddressPattern:
    for address in addresses:
        if not _is_ip(address):
            raise AclConfigError(f"Netaddress examine Exception netaddress is {address.strip()}")
    return AddressPattern(pattern, addresses=frozenset(canonical(a) for a in addresses))


def _braces(pattern: str) -> AddressPattern:
    """``a.b.c.{x,y}`` / ``a:b:...:{x,y}``: the prefix with each listed last segment."""
    sep = ":" if ":" in pattern else "."
    prefix, _, last = pattern.rpartition(sep)
    if not last.startswith("{") or (sep == "." and pattern.count(".") != 3):
        raise _refused(pattern, "MultipleRemoteAddressStrategy")
    members = [m.strip() for m in last[1:-1].split(",") if m.strip()]
    return _set(pattern, [f"{prefix}{sep}{m}" for m in members])


def _range(pattern: str) -> AddressPattern:
    """A head of exact segments, one ``*`` or ``n-m`` segment, then only ``*``."""
    v6 = ":" in pattern
    parts = [p.strip() for p in pattern.split(":" if v6 else ".")]
    width, top = (8, 0xFFFF) if v6 else (4, 255)
    if not 2 <= len(parts) <= width or (not v6 and len(parts) != width):
        raise _refused(pattern, "RangeRemoteAddressStrategy")
    index = next((i for i, p in enumerate(parts) if p == "*" or "-" in p), None)
    if not index or any(p != "*" for p in parts[index + 1 :]):
        raise _refused(pattern, "RangeRemoteAddressStrategy")
    try:
        head = tuple(_number(p, v6, top) for p in parts[:index])
        if parts[index] == "*":
            low, high = 0, top
        else:
            first, _, last = parts[index].partition("-")
            low, high = _number(first, v6, top), _number(last, v6, top)
    except ValueError:
        raise _refused(pattern, "RangeRemoteAddressStrategy") from None
    if low > high:
        raise _refused(pattern, "RangeRemoteAddressStrategy")
    return AddressPattern(pattern, head=head, low=low, high=high, v6=v6)


def _number(segment: str, v6: bool, top: int) -> int:
    """One segment's value; ``ValueError`` unless plain digits (hex for IPv6) in range."""
    digits = "0123456789abcdefABCDEF" if v6 else "0123456789"
    if not segment or len(segment) > 4 or any(c not in digits for c in segment):
        raise ValueError(segment)
    value = int(segment, 16 if v6 else 10)
    if value > top:
        raise ValueError(segment)
    return value
