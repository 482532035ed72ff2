"""RocketMQ's SQL92 property filter: its grammar, parsed once, compiled into closures.

A consumer subscribing with ``MessageSelector.by_sql("a > 5 AND region IN ('eu')")`` gets
the messages whose properties (user properties, plus system ones such as ``TAGS``) make the
expression TRUE. The rules are RocketMQ's (``SelectorParser.jj`` and ``filter/expression``):

* three-valued logic: a missing property is NULL, a comparison with NULL is NULL, and only a
  TRUE result matches; an evaluation error (``a > 10`` with ``a = "x"``) does not match;
* a property is always a string; compared with a number constant it is parsed as the
  constant's Java type (Integer, Long or Double: ``a > 10`` with ``a = "10.5"`` is an
  error), with a boolean constant as ``Boolean.valueOf``; two strings ordered by ``<``,
  ``>``... are both parsed as doubles; other mixed types compare as -1;
* parse-time refusals: ``= NULL``, ordering a string or boolean constant, BETWEEN bounds
  that are reversed, IN of anything but a property, a top level that is not boolean.

``compile_sql`` parses and compiles an expression once; the ``SqlFilter`` it returns is a
plain callable evaluated per message, so the read path pays one Python call per message
and nothing for parsing. A bad expression raises ``FilterExpressionError`` naming the
1-based position and the reason.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Mapping
from typing import Any

from shmq.errors import FilterExpressionError

__all__ = ["SqlFilter", "compile_sql"]

Props = Mapping[str, str]
Eval = Callable[[Props], Any]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      | (?P<comment>--[^\n\r]*|/\*.*?\*/)
      | (?P<float>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
      | (?P<int>(?:0|[1-9][0-9]*)[lL]?)
      | (?P<str>'(?:[^']|'')*')
      | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
      | (?P<op><>|>=|<=|[=><(),+-])
    """,
    re.VERBOSE | re.DOTALL,
)
_KEYWORDS = frozenset(
    [
        "AND",
        "OR",
        "NOT",
        "BETWEEN",
        "IN",
        "IS",
        "NULL",
        "TRUE",
        "FALSE",
        "CONTAINS",
        "STARTSWITH",
        "ENDSWITH",
    ]
)
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?))[fFdD]?"
)


class _EvalError(Exception):
    """An evaluation error (a property that does not parse as the constant's type): the
    message does not match. Never leaves this module."""


# -- Java's conversions ---------------------------------------------------------------------


def _java_int(text: str) -> int:
    """``Integer.valueOf``: optional sign, ASCII digits, in range."""
    if _JAVA_INTEGER.fullmatch(text) is None:
        raise _EvalError(text)
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        raise _EvalError(text)
    return value


def _java_long(text: str) -> int:
    """``Long.valueOf``."""
    if _JAVA_INTEGER.fullmatch(text) is None:
        raise _EvalError(text)
    value = int(text)
    if not LONG_MIN <= value <= LONG_MAX:
        raise _EvalError(text)
    return value


def _java_double(text: str) -> float:
    """``Double.valueOf``: trims control characters and spaces, takes NaN, Infinity and a
    trailing ``f``/``d``."""
    core = text.strip("".join(map(chr, range(33))))
    if _JAVA_DOUBLE.fullmatch(core) is None:
        raise _EvalError(text)
    if core[-1] in "fFdD":
        core = core[:-1]
    return float(core)


_CONVERT: dict[str, Callable[[str], Any]] = {
    "int": _java_int,
    "long": _java_long,
    "double": _java_double,
}


def _double_bits(value: float) -> int:
    """``Double.doubleToLongBits`` (every NaN the canonical one)."""
    if value != value:
        return 0x7FF8000000000000
    return struct.unpack("<q", struct.pack("<d", value))[0]


def _num_cmp(a: int | float, b: int | float) -> int:
    """``compareTo`` of two numbers after Java's widening: a double comparison orders NaN
    above everything and -0.0 below 0.0, as ``Double.compareTo`` does."""
    if a.__class__ is float or b.__class__ is float:
        a, b = float(a), float(b)
        if a < b:
            return -1
        if a > b:
            return 1
        if a == b and a != 0.0:
            return 0
        x, y = _double_bits(a), _double_bits(b)
        return (x > y) - (x < y)
    return (a > b) - (a < b)


def _compare(lv: Any, rv: Any, lt: str | None, rt: str | None, ordering: bool) -> int:
    """RocketMQ's ``ComparisonExpression.compare`` of two non-null values; ``lt``/``rt``:
    the Java number type of a side that is a number constant (numbers come only from
    constants), to parse the other side's string as."""
    lc, rc = lv.__class__, rv.__class__
    if lc is str:
        if rc is str:
            if not ordering:
                return 0 if lv == rv else 1
            return _num_cmp(_java_double(lv), _java_double(rv))
        if rc is bool:
            return int(lv.lower() == "true") - int(rv)
        if rc is int or rc is float:
            return _num_cmp(_CONVERT[rt or "double"](lv), rv)
        return -1
    if rc is str:
        if lc is bool:
            return -_compare(rv, lv, rt, lt, ordering)
        if lc is int or lc is float:
            return _num_cmp(lv, _CONVERT[lt or "double"](rv))
        return -1
    if lc is bool or rc is bool:
        return int(lv) - int(rv) if lc is rc else -1
    return _num_cmp(lv, rv)


# -- the compiled tree ----------------------------------------------------------------------

_NOT_CONST = object()


class _Node:
    """One compiled subexpression: ``fn(props)`` gives its value; what the parser's checks
    need to know about it (a constant's value and Java type, whether it is boolean, the
    property it names)."""

    __slots__ = ("boolean", "const", "fn", "jtype", "prop", "req")

    def __init__(
        self,
        fn: Eval,
        *,
        const: Any = _NOT_CONST,
        jtype: str | None = None,
        boolean: bool = False,
        prop: str | None = None,
        req: Required = (),
    ) -> None:
        self.fn = fn
        self.const = const
        self.jtype = jtype
        self.boolean = boolean
        self.prop = prop
        self.req = req  # what the record's properties must hold for it to be TRUE


# What a message's encoded properties (``name\x01value\x02`` pairs) must hold for an
# expression to be TRUE: for each group, one of its byte strings. Sound, never complete: a
# message without them is not matched, one with them is evaluated (``SqlFilter.required``).
Required = tuple[frozenset[bytes], ...]
MAX_GROUPS = 16  # an OR of ANDs multiplies groups; past this it requires nothing


def _present(*nodes: _Node) -> Required:
    """A comparison is TRUE only when its properties are set (NULL otherwise)."""
    return tuple(frozenset({f"{n.prop}\x01".encode()}) for n in nodes if n.prop is not None)


def _either(left: Required, right: Required) -> Required:
    """An OR is TRUE only when one side is: each pair of groups, joined, holds."""
    if not left or not right or len(left) * len(right) > MAX_GROUPS:
        return ()
    return tuple(a | b for a in left for b in right)


def _equal_text(prop: _Node, const: _Node) -> Required:
    """``name = 'text'``: the pair itself (a string compares as written)."""
    if prop.prop is not None and const.jtype == "str":
        return (frozenset({f"{prop.prop}\x01{const.const}".encode()}),)
    return _present(prop)


def _constant(value: Any, jtype: str) -> _Node:
    return _Node(lambda _p: value, const=value, jtype=jtype, boolean=jtype in ("bool", "null"))


def _property(name: str) -> _Node:
    return _Node(lambda p: p.get(name), prop=name)


def _and(left: Eval, right: Eval) -> Eval:
    def fn(p: Props) -> bool | None:
        lv = left(p)
        if lv is False:
            return False
        rv = right(p)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return fn


def _or(left: Eval, right: Eval) -> Eval:
    def fn(p: Props) -> bool | None:
        lv = left(p)
        if lv is True:
            return True
        rv = right(p)
        if rv is True:
            return True
        return None if lv is None or rv is None else False

    return fn


def _not(inner: Eval) -> Eval:
    def fn(p: Props) -> bool | None:
        v = inner(p)
        return None if v is None else not v

    return fn


def _comparison(op: str, left: _Node, right: _Node) -> Eval:
    """``=`` or an ordering, NULL when a side is NULL. The hot form, a property against a
    number constant, reads the property and converts it without the general dispatch."""
    ordering = op != "="
    test: Callable[[int], bool] = {
        "=": lambda c: c == 0,
        ">": lambda c: c > 0,
        ">=": lambda c: c >= 0,
        "<": lambda c: c < 0,
        "<=": lambda c: c <= 0,
    }[op]
    lf, rf, lt, rt = left.fn, right.fn, left.jtype, right.jtype
    if left.prop is not None and right.jtype in _CONVERT:
        name, conv, c = left.prop, _CONVERT[right.jtype], right.const

        def prop_vs_number(p: Props) -> bool | None:
            v = p.get(name)
            return None if v is None else test(_num_cmp(conv(v), c))

        return prop_vs_number

    def fn(p: Props) -> bool | None:
        lv = lf(p)
        rv = rf(p)
        if lv is None or rv is None:
            return None
        return test(_compare(lv, rv, lt, rt, ordering))

    return fn


def _in(name: str, values: frozenset[str], negated: bool) -> Eval:
    def fn(p: Props) -> bool | None:
        v = p.get(name)
        return None if v is None else (v in values) is not negated

    return fn


def _string_test(kind: str, inner: Eval, search: str, negated: bool) -> Eval:
    """CONTAINS / STARTSWITH / ENDSWITH: FALSE (never NULL) for a missing or non-string
    value or an empty search string, whether negated or not."""
    if kind == "CONTAINS":

        def test(v: str) -> bool:
            return search in v
    elif kind == "STARTSWITH":

        def test(v: str) -> bool:
            return v.startswith(search)
    else:

        def test(v: str) -> bool:
            return v.endswith(search)

    def fn(p: Props) -> bool:
        v = inner(p)
        if v.__class__ is not str or not search:
            return False
        return test(v) is not negated

    return fn


def _negate(inner: Eval) -> Eval:
    """Unary minus of a non-constant: a number negated, anything else NULL (a property is
    a string, so always NULL)."""

    def fn(p: Props) -> Any:
        v = inner(p)
        return -v if v.__class__ is int or v.__class__ is float else None

    return fn


# -- the parser -----------------------------------------------------------------------------


class _Token:
    __slots__ = ("kind", "pos", "text")

    def __init__(self, kind: str, text: str, pos: int) -> None:
        self.kind = kind  # "int", "float", "str", "id", "kw", "op", "end"
        self.text = text  # a keyword upper-cased
        self.pos = pos  # 1-based

    def show(self) -> str:
        return "end of expression" if self.kind == "end" else repr(self.text)


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    at, n = 0, len(text)
    while at < n:
        m = _TOKEN.match(text, at)
        if m is None:
            ch = text[at]
            if ch == "'":
                raise FilterExpressionError("unterminated string literal", at + 1)
            if text.startswith("/*", at):
                raise FilterExpressionError("unterminated comment", at + 1)
            raise FilterExpressionError(f"unexpected character {ch!r}", at + 1)
        kind = m.lastgroup
        assert kind is not None
        if kind == "id" and m.group().upper() in _KEYWORDS:
            out.append(_Token("kw", m.group().upper(), at + 1))
        elif kind not in ("ws", "comment"):
            out.append(_Token(kind, m.group(), at + 1))
        at = m.end()
    out.append(_Token("end", "", n + 1))
    return out


class _Parser:
    """Recursive descent over RocketMQ's levels, low to high: OR; AND; equality (``=``,
    ``<>``, IS [NOT] NULL); comparison (orderings, [NOT] BETWEEN / IN / CONTAINS /
    STARTSWITH / ENDSWITH); unary (``+``, ``-``, NOT); primary."""

    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    # token helpers
    @property
    def tok(self) -> _Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> _Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, *texts: str) -> bool:
        t = self.tok
        return t.kind in ("kw", "op") and t.text in texts

    def take(self) -> _Token:
        t = self.tok
        self.i = min(self.i + 1, len(self.toks) - 1)
        return t

    def expect(self, text: str) -> _Token:
        if not self.at(text):
            self.fail(f"expected {text!r}, found {self.tok.show()}")
        return self.take()

    def fail(self, reason: str, tok: _Token | None = None) -> None:
        raise FilterExpressionError(reason, (tok or self.tok).pos)

    # checks (RocketMQ's ComparisonExpression / asBooleanExpression)
    def boolean(self, node: _Node, tok: _Token) -> Eval:
        if node.boolean:
            return node.fn
        if node.prop is not None:
            name = node.prop
            return lambda p: None if p.get(name) is None else False
        self.fail("expression will not result in a boolean value", tok)
        raise AssertionError  # unreachable: fail raises

    def orderable(self, node: _Node, tok: _Token) -> None:
        if node.const is not _NOT_CONST and node.jtype not in _CONVERT:
            self.fail(f"value {node.const!r} cannot be compared with {tok.text}", tok)
        if node.boolean:
            self.fail(f"a boolean value cannot be compared with {tok.text}", tok)

    def equatable(self, left: _Node, right: _Node, tok: _Token) -> None:
        for node in (left, right):
            if node.jtype == "null":
                self.fail(f"NULL cannot be compared with {tok.text}; use IS NULL", tok)
        both_constant = left.const is not _NOT_CONST and right.const is not _NOT_CONST
        if both_constant and (left.jtype == "bool") != (right.jtype == "bool"):
            self.fail(f"{left.const!r} cannot be compared with {right.const!r}", tok)

    # levels
    def parse(self) -> tuple[Eval, Required]:
        first = self.tok
        node = self.or_expr()
        if self.tok.kind != "end":
            self.fail(f"unexpected {self.tok.show()}")
        return self.boolean(node, first), node.req

    def or_expr(self) -> _Node:
        first = self.tok
        left = self.and_expr()
        while self.at("OR"):
            self.take()
            right_tok = self.tok
            right = self.and_expr()
            fn = _or(self.boolean(left, first), self.boolean(right, right_tok))
            left = _Node(fn, boolean=True, req=_either(left.req, right.req))
        return left

    def and_expr(self) -> _Node:
        first = self.tok
        left = self.equality()
        while self.at("AND"):
            self.take()
            right_tok = self.tok
            right = self.equality()
            left = _Node(_and(self.boolean(left, first), self.boolean(right, right_tok)),
                         boolean=True, req=left.req + right.req)  # fmt: skip
        return left

    def equality(self) -> _Node:
        left = self.comparison()
        while True:
            if self.at("=", "<>"):
                op = self.take()
                right = self.comparison()
                self.equatable(left, right, op)
                fn = _comparison("=", left, right)
                req = (_equal_text(left, right) + _equal_text(right, left)
                       if op.text == "=" else _present(left, right))  # fmt: skip
                left = _Node(fn if op.text == "=" else _not(fn), boolean=True, req=req)
            elif self.at("IS"):
                self.take()
                negated = self.at("NOT")
                if negated:
                    self.take()
                self.expect("NULL")
                inner = left.fn
                if negated:
                    left = _Node(lambda p, f=inner: f(p) is not None, boolean=True,
                                 req=_present(left))  # fmt: skip
                else:
                    left = _Node(lambda p, f=inner: f(p) is None, boolean=True)
            else:
                return left

    def comparison(self) -> _Node:
        left = self.unary()
        while True:
            tok = self.tok
            negated = self.at("NOT") and self.peek().kind == "kw" and self.peek().text in (
                "BETWEEN", "IN", "CONTAINS", "STARTSWITH", "ENDSWITH")  # fmt: skip
            if negated:
                self.take()
            op = self.tok
            if self.at(">", ">=", "<", "<=") and not negated:
                self.take()
                right = self.unary()
                self.orderable(left, op)
                self.orderable(right, op)
                left = _Node(_comparison(op.text, left, right), boolean=True,
                             req=_present(left, right))  # fmt: skip
            elif self.at("BETWEEN"):
                self.take()
                low = self.unary()
                self.expect("AND")
                high = self.unary()
                for node in (left, low, high):
                    self.orderable(node, op)
                numbers = low.jtype in _CONVERT and high.jtype in _CONVERT
                if numbers and _num_cmp(low.const, high.const) > 0:
                    self.fail(f"BETWEEN {low.const} AND {high.const}: low > high", op)
                if negated:
                    fn = _or(_comparison("<", left, low), _comparison(">", left, high))
                else:
                    fn = _and(_comparison(">=", left, low), _comparison("<=", left, high))
                left = _Node(fn, boolean=True, req=_present(left, low, high))
            elif self.at("IN"):
                self.take()
                if left.prop is None:
                    self.fail("IN needs a property on its left", tok)
                self.expect("(")
                values = [self.string()]
                while self.at(","):
                    self.take()
                    values.append(self.string())
                self.expect(")")
                req = (_present(left) if negated else
                       (frozenset(f"{left.prop}\x01{v}".encode() for v in values),))  # fmt: skip
                left = _Node(_in(left.prop, frozenset(values), negated), boolean=True, req=req)
            elif self.at("CONTAINS", "STARTSWITH", "ENDSWITH"):
                self.take()
                fn = _string_test(op.text, left.fn, self.string(), negated)
                left = _Node(fn, boolean=True, req=_present(left))
            else:
                return left

    def string(self) -> str:
        if self.tok.kind != "str":
            self.fail(f"expected a string literal, found {self.tok.show()}")
        return self.take().text[1:-1].replace("''", "'")

    def unary(self) -> _Node:
        if self.at("+"):
            self.take()
            return self.unary()
        if self.at("-"):
            self.take()
            if self.tok.kind == "int":  # so that -9223372036854775808 is a Long
                return self.integer(self.take(), negative=True)
            inner = self.unary()
            if inner.jtype in _CONVERT:
                return _constant(-inner.const, inner.jtype)
            return _Node(_negate(inner.fn))
        if self.at("NOT"):
            self.take()
            inner_tok = self.tok
            return _Node(_not(self.boolean(self.unary(), inner_tok)), boolean=True)
        return self.primary()

    def integer(self, tok: _Token, negative: bool = False) -> _Node:
        value = int(tok.text.rstrip("lL"))
        if negative:
            value = -value
        if not LONG_MIN <= value <= LONG_MAX:
            self.fail(f"integer {tok.text} is out of the long range", tok)
        return _constant(value, "int" if INT_MIN <= value <= INT_MAX else "long")

    def primary(self) -> _Node:
        tok = self.tok
        if tok.kind == "int":
            return self.integer(self.take())
        if tok.kind == "float":
            self.take()
            value = float(tok.text)
            if value == 0.0:
                self.fail(f"float {tok.text} is below Double.MIN_VALUE", tok)
            return _constant(value, "double")
        if tok.kind == "str":
            return _constant(self.string(), "str")
        if tok.kind == "id":
            return _property(self.take().text)
        if self.at("TRUE", "FALSE"):
            return _constant(self.take().text == "TRUE", "bool")
        if self.at("NULL"):
            self.take()
            return _constant(None, "null")
        if self.at("("):
            self.take()
            node = self.or_expr()
            self.expect(")")
            return node
        self.fail(f"unexpected {tok.show()}")
        raise AssertionError  # unreachable: fail raises


class SqlFilter:
    """A compiled SQL92 expression: ``filter(properties)`` is True when the expression is
    TRUE for those properties (NULL, FALSE and evaluation errors do not match)."""

    __slots__ = ("_fn", "expression", "required")

    def __init__(self, expression: str, fn: Eval, required: Required = ()) -> None:
        self.expression = expression
        self._fn = fn
        # for each group, one of these byte strings is in the encoded properties of every
        # message the expression matches: a reader skips the others without decoding them
        self.required = required

    def __call__(self, properties: Props) -> bool:
        try:
            return self._fn(properties) is True
        except _EvalError:
            return False

    def evaluate(self, properties: Props) -> bool | None:
        """The three-valued result (None: NULL); raises ``ValueError`` on an evaluation
        error. For tests and tools; the read path calls the filter itself."""
        try:
            return self._fn(properties)
        except _EvalError as exc:
            raise ValueError(f"cannot evaluate: {exc}") from None

    def __repr__(self) -> str:
        return f"SqlFilter({self.expression!r})"


def compile_sql(expression: str) -> SqlFilter:
    """Parse and compile ``expression`` (RocketMQ's SQL92 grammar); raises
    ``FilterExpressionError`` with the position and reason when it is not one."""
    if not isinstance(expression, str):
        raise FilterExpressionError(f"expression {expression!r} is not a string", 1)
    if not expression.strip():
        raise FilterExpressionError("empty expression", 1)
    return SqlFilter(expression, *_Parser(expression).parse())
