"""RocketMQ's custom headers: a request's typed fields read from its extFields.

RocketMQ declares each request header as a class whose fields are ``String``, ``Integer``,
``Long`` or ``Boolean`` and marked ``@CFNotNull`` when required; ``decodeCommandCustomHeader``
reads them from the string map. A required field that is absent, or a number that does not
parse as a Java ``int`` / ``long``, fails the request with SYSTEM_ERROR and a remark naming
the field, and the connection stays open; a ``Boolean`` is ``Boolean.parseBoolean``: "true"
in any case is true, anything else false. Values arrive as text in both header encodings
(the JSON reader turns numbers and booleans into text as fastjson does), so one reader serves
both.
"""

from __future__ import annotations

import re
from typing import Any

from shmq.remoting.codes import ResponseCode, request_name
from shmq.remoting.protocol import RemotingCommand, ResponseError

STR, INT, LONG, BOOL = "String", "Integer", "Long", "Boolean"
_BOUNDS = {INT: (-(2**31), 2**31 - 1), LONG: (-(2**63), 2**63 - 1)}
_DIGITS = re.compile(r"[+-]?[0-9]+")  # what Java's parseInt / parseLong accept

# a header: field name -> (type, required)
Spec = dict[str, tuple[str, bool]]


def decode_header(request: RemotingCommand, spec: Spec) -> dict[str, Any]:
    """The fields of ``spec`` read from ``request``: ``str``, ``int`` or ``bool`` values, and
    ``None`` for an optional field that is absent. ``ResponseError`` (SYSTEM_ERROR) names the
    first field that is missing or not a number of its type."""
    fields = request.ext_fields
    out: dict[str, Any] = {}
    for name, (kind, required) in spec.items():
        text = fields.get(name)
        if text is None:
            if required:
                raise ResponseError(
                    ResponseCode.SYSTEM_ERROR,
                    f"the custom field <{name}> is null in {request_name(request.code)}",
                )
            out[name] = None
        elif kind == STR:
            out[name] = text
        elif kind == BOOL:
            out[name] = text.lower() == "true"
        else:
            out[name] = _number(request, name, text, kind)
    return out


def _number(request: RemotingCommand, name: str, text: str, kind: str) -> int:
    lo, hi = _BOUNDS[kind]
    if _DIGITS.fullmatch(text) and lo <= (value := int(text)) <= hi:
        return value
    raise ResponseError(
        ResponseCode.SYSTEM_ERROR,
        f"the custom field <{name}> = {text[:64]!r} is not a Java {kind}"
        f" in {request_name(request.code)}",
    )
