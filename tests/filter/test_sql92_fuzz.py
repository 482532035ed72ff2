"""Hypothesis over the SQL92 filter: random expressions over random property maps against an
independent evaluator written here from the spec, and random text that must either compile
or raise ``FilterExpressionError`` (never another exception)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.errors import FilterExpressionError
from shmq.filter import compile_sql

NAMES = ["a", "b", "TAGS"]
VALUES = ["1", "2", "10", "-3", "2.5", "abc", "", "true", "TRUE", "x", "1e2", "3000000000",
          " 5", "NaN", "ab", "bc"]  # fmt: skip


class Err(Exception):
    """The reference evaluator's evaluation error."""


def java_int(s: str, bits: int) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        raise Err(s)
    v = int(s)
    if not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        raise Err(s)
    return v


def java_double(s: str) -> float:
    s = s.strip()
    if not re.fullmatch(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)", s):
        raise Err(s)
    return float(s)


def cmp_double(x: float, y: float) -> int:
    # Double.compareTo, for the values VALUES can make: NaN above all, -0.0 < 0.0
    key = lambda v: (1, 0.0) if v != v else (0, v, str(v).startswith("-"))  # noqa: E731
    kx, ky = key(x), key(y)
    if kx[0] != ky[0]:
        return kx[0] - ky[0]
    if kx[0] == 1 or x != y:
        return 0 if kx[0] == 1 else (1 if x > y else -1)
    return (ky[2] - kx[2]) if x == 0 else 0


def ref(node, props):
    kind = node[0]
    if kind == "and":
        lv = ref(node[1], props)
        if lv is False:
            return False
        rv = ref(node[2], props)
        if rv is False:
            return False
        return None if None in (lv, rv) else True
    if kind == "or":
        lv = ref(node[1], props)
        if lv is True:
            return True
        rv = ref(node[2], props)
        if rv is True:
            return True
        return None if None in (lv, rv) else False
    if kind == "not":
        v = ref(node[1], props)
        return None if v is None else not v
    if kind == "bare":
        return None if props.get(node[1]) is None else False
    v = props.get(node[1])
    if kind == "isnull":
        return (v is None) is not node[2]
    if kind in ("contains", "startswith", "endswith"):
        _, _, s, neg = node
        if v is None or not s:
            return False
        hit = {"contains": s in v, "startswith": v.startswith(s), "endswith": v.endswith(s)}
        return hit[kind] is not neg
    if v is None:
        return None
    if kind == "in":
        return (v in node[2]) is not node[3]
    if kind == "between":
        _, _, lo, hi, neg = node
        x = java_int(v, 32)
        return (x < lo or x > hi) if neg else (lo <= x <= hi)
    _, _, op, ctype, c = node  # "cmp": property op constant
    if ctype == "str":
        return (v == c) is (op == "=") if op in ("=", "<>") else None
    if ctype == "bool":
        return ((v.lower() == "true") == c) is (op == "=")
    if ctype == "double":
        r = cmp_double(java_double(v), c)
    else:
        # an integer literal is an Integer when it fits, whatever its L suffix says
        x = java_int(v, 32 if -(1 << 31) <= c < 1 << 31 else 64)
        r = (x > c) - (x < c)
    return {"=": r == 0, "<>": r != 0, ">": r > 0, ">=": r >= 0, "<": r < 0, "<=": r <= 0}[op]


def render(node) -> str:
    kind = node[0]
    if kind in ("and", "or"):
        return f"({render(node[1])} {kind.upper()} {render(node[2])})"
    if kind == "not":
        return f"NOT ({render(node[1])})"
    if kind == "bare":
        return node[1]
    if kind == "isnull":
        return f"{node[1]} IS {'NOT ' if node[2] else ''}NULL"
    if kind in ("contains", "startswith", "endswith"):
        quoted = node[2].replace("'", "''")
        return f"{node[1]} {'NOT ' if node[3] else ''}{kind.upper()} '{quoted}'"
    if kind == "in":
        items = ", ".join(f"'{s}'" for s in sorted(node[2]))
        return f"{node[1]} {'NOT ' if node[3] else ''}IN ({items})"
    if kind == "between":
        return f"{node[1]} {'NOT ' if node[4] else ''}BETWEEN {node[2]} AND {node[3]}"
    _, name, op, ctype, c = node
    text = {
        "str": lambda: "'" + c.replace("'", "''") + "'",
        "bool": lambda: str(c).upper(),
        "int": lambda: str(c),
        "long": lambda: f"{c}L",
        "double": lambda: repr(c),
    }[ctype]()
    return f"{name} {op} {text}"


names = st.sampled_from(NAMES)
ops = st.sampled_from(["=", "<>", ">", ">=", "<", "<="])
leaf = st.one_of(
    st.tuples(st.just("cmp"), names, st.sampled_from(["=", "<>"]), st.just("str"),
              st.sampled_from([*VALUES, "it's"])),
    st.tuples(st.just("cmp"), names, st.sampled_from(["=", "<>"]), st.just("bool"),
              st.booleans()),
    st.tuples(st.just("cmp"), names, ops, st.just("int"), st.integers(-20, 20)),
    st.tuples(st.just("cmp"), names, ops, st.just("long"), st.integers(-20, 3_000_000_001)),
    st.tuples(st.just("cmp"), names, ops, st.just("double"),
              st.sampled_from([0.5, 1.0, 2.5, 10.0, 1e2, 3e9])),
    st.tuples(st.just("between"), names, st.integers(-5, 3), st.integers(3, 12), st.booleans()),
    st.tuples(st.just("in"), names, st.frozensets(st.sampled_from(VALUES), min_size=1),
              st.booleans()),
    st.tuples(st.just("isnull"), names, st.booleans()),
    st.tuples(st.sampled_from(["contains", "startswith", "endswith"]), names,
              st.sampled_from(["", "a", "b", "1", "x"]), st.booleans()),
    st.tuples(st.just("bare"), names),
)  # fmt: skip
trees = st.recursive(
    leaf,
    lambda kids: st.one_of(
        st.tuples(st.sampled_from(["and", "or"]), kids, kids),
        st.tuples(st.just("not"), kids),
    ),
    max_leaves=8,
)
prop_maps = st.dictionaries(names, st.sampled_from(VALUES), max_size=3)


@settings(max_examples=1500, deadline=None)
@given(trees, st.lists(prop_maps, min_size=1, max_size=4))
def test_matches_an_independent_evaluator(tree, maps) -> None:
    compiled = compile_sql(render(tree))
    for props in maps:
        try:
            want = ref(tree, props)
        except Err:
            want = "error"
        try:
            got = compiled.evaluate(props)
        except ValueError:
            got = "error"
        assert got == want, (render(tree), props)
        assert compiled(props) is (want is True)
        if want is True:  # what a reader checks before it decodes: never a false negative
            encoded = "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode()
            for group in compiled.required:
                assert any(pattern in encoded for pattern in group), (render(tree), props)


TOKENS = ["a", "b", "TAGS", "AND", "OR", "NOT", "(", ")", "=", "<>", ">", ">=", "<", "<=",
          "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "CONTAINS", "STARTSWITH", "ENDSWITH",
          "'x'", "''", "1", "2.5", "-", "+", ",", "1L", "0", ".5", "1e3", "'",
          "/*", "--", "$"]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.lists(st.sampled_from(TOKENS), max_size=12).map(" ".join), st.text()),
       prop_maps)  # fmt: skip
def test_random_text_compiles_or_raises_the_clear_error(text: str, props: dict) -> None:
    try:
        compiled = compile_sql(text)
    except FilterExpressionError as exc:
        assert 1 <= exc.position <= len(text) + 1 and exc.reason
        return
    assert compiled(props) in (True, False)
