"""RocketMQ's SQL92 filter grammar and semantics (spec section 7), operator by operator."""

from __future__ import annotations

import pytest

from shmq.errors import FilterExpressionError, ShmqError
from shmq.filter import compile_sql


def ev(expression: str, **props: str) -> bool | None:
    return compile_sql(expression).evaluate(props)


def matches(expression: str, **props: str) -> bool:
    return compile_sql(expression)(props)


@pytest.mark.parametrize(
    ("expression", "props", "want"),
    [
        ("a = 'x'", {"a": "x"}, True),
        ("a = 'x'", {"a": "y"}, False),
        ("a <> 'x'", {"a": "y"}, True),
        ("a <> 'x'", {"a": "x"}, False),
        ("a > 5", {"a": "6"}, True),
        ("a > 5", {"a": "5"}, False),
        ("a >= 5", {"a": "5"}, True),
        ("a < 5", {"a": "4"}, True),
        ("a <= 5", {"a": "5"}, True),
        ("a <= 5", {"a": "6"}, False),
        ("a = 5", {"a": "5"}, True),
        ("a = 5", {"a": "+5"}, True),
        ("a > -2", {"a": "-1"}, True),
        ("a BETWEEN 1 AND 3", {"a": "1"}, True),
        ("a BETWEEN 1 AND 3", {"a": "3"}, True),
        ("a BETWEEN 1 AND 3", {"a": "4"}, False),
        ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
        ("a NOT BETWEEN 1 AND 3", {"a": "2"}, False),
        ("a IN ('eu', 'us')", {"a": "us"}, True),
        ("a IN ('eu', 'us')", {"a": "cn"}, False),
        ("a NOT IN ('eu', 'us')", {"a": "cn"}, True),
        ("a NOT IN ('eu')", {"a": "eu"}, False),
        ("a IS NULL", {}, True),
        ("a IS NULL", {"a": ""}, False),
        ("a IS NOT NULL", {"a": ""}, True),
        ("a IS NOT NULL", {}, False),
        ("a CONTAINS 'bc'", {"a": "abcd"}, True),
        ("a CONTAINS 'x'", {"a": "abcd"}, False),
        ("a NOT CONTAINS 'x'", {"a": "abcd"}, True),
        ("a STARTSWITH 'ab'", {"a": "abcd"}, True),
        ("a NOT STARTSWITH 'ab'", {"a": "abcd"}, False),
        ("a ENDSWITH 'cd'", {"a": "abcd"}, True),
        ("a NOT ENDSWITH 'cd'", {"a": "abxx"}, True),
        ("a = 'it''s'", {"a": "it's"}, True),
        ("a = TRUE", {"a": "True"}, True),
        ("a = FALSE", {"a": "yes"}, True),
        ("a > 1.5", {"a": "2"}, True),
        ("a > 1.", {"a": "1.5"}, True),
        ("a < .5", {"a": "0.25"}, True),
        ("a = 1e3", {"a": "1000"}, True),
        ("a = 1E+3", {"a": "1000.0"}, True),
        ("a > 10L", {"a": "11"}, True),
        ("a > 3000000000", {"a": "3000000001"}, True),
        ("TAGS = 'A' AND KEYS = 'k'", {"TAGS": "A", "KEYS": "k"}, True),
        ("a = b", {"a": "x", "b": "x"}, True),
        ("a > b", {"a": "2", "b": "10"}, False),  # two strings ordered as doubles
        ("$a_1 = 'x'", {"$a_1": "x"}, True),
        ("a = 'x' -- trailing comment", {"a": "x"}, True),
        ("a /* inline */ = 'x'", {"a": "x"}, True),
        ("a = 'x' and b = 'y' or c = 'z'", {"c": "z"}, True),  # keywords: any case
        ("TRUE", {}, True),
        ("FALSE", {}, False),
    ],
)
def test_operators(expression: str, props: dict, want: bool) -> None:
    assert ev(expression, **props) is want
    assert matches(expression, **props) is want


def test_precedence_and_over_or_and_parentheses() -> None:
    # AND binds tighter than OR
    assert matches("a = '1' OR b = '1' AND c = '1'", a="1")
    assert not matches("(a = '1' OR b = '1') AND c = '1'", a="1")
    # NOT is unary: applies to the comparison's operand, then compared
    assert matches("NOT (a = '1')", a="2")
    assert matches("NOT a = '1' OR b IS NULL")  # (NOT a) = '1' is NULL; OR TRUE
    assert matches("a = '1' AND NOT (b = '2' OR c = '3')", a="1", b="0", c="0")
    assert matches("((a > 1)) AND (((b < 2)))", a="2", b="1")


def test_null_semantics() -> None:
    assert ev("a = 'x'") is None and ev("a <> 'x'") is None  # missing: both unknown
    assert ev("a > 5") is None and ev("NOT (a > 5)") is None
    assert ev("a IN ('x')") is None and ev("a NOT IN ('x')") is None
    assert ev("a BETWEEN 1 AND 2") is None and ev("a NOT BETWEEN 1 AND 2") is None
    assert ev("a CONTAINS 'x'") is False and ev("a NOT CONTAINS 'x'") is False
    assert ev("a CONTAINS ''", a="x") is False and ev("a NOT STARTSWITH ''", a="x") is False
    # AND: FALSE wins over NULL; OR: TRUE wins over NULL
    assert ev("a = 'x' AND b = 'y'", b="z") is False
    assert ev("a = 'x' AND b = 'y'", b="y") is None
    assert ev("a = 'x' OR b = 'y'", b="y") is True
    assert ev("a = 'x' OR b = 'y'", b="z") is None
    assert ev("NULL") is None and ev("NULL IS NULL") is True
    # a bare property used as a boolean: NULL if missing, FALSE otherwise
    assert ev("a") is None and ev("a", a="true") is False and ev("NOT a", a="x") is True
    assert not matches("a = 'x' OR b > 1")


def test_type_rules() -> None:
    # the property is parsed as the constant's Java type: 10.5 is no Integer
    assert not matches("a > 10", a="10.5")
    assert matches("a > 10.0", a="10.5")
    assert not matches("a > 10", a=" 11")  # Integer.valueOf does not trim
    assert matches("a > 10.0", a=" 11 ")  # Double.valueOf does
    assert matches("a > 10.0", a="11d")
    assert not matches("a = 5", a="3000000000")  # beyond Integer
    assert matches("a = 3000000000", a="3000000000")  # a Long constant
    assert matches("a > -9223372036854775808", a="0")
    assert not matches("a > 1", a="abc")  # an error, not a match ...
    with pytest.raises(ValueError):
        ev("a > 1", a="abc")
    # ... and NOT of an error is an error, while AND's short cut skips it
    assert not matches("NOT (a > 1)", a="abc")
    assert matches("NOT (b = 'y' AND a > 1)", a="abc", b="n")
    # Double.compareTo: NaN is above everything, -0.0 below 0.0
    assert matches("a > 1.0", a="NaN") and matches("a < 0.1", a="-0.0")
    assert not matches("a = 0.1", a="-0.0")
    # two strings ordered: both as doubles, else an error
    assert matches("a < b", a="9", b="10") and not matches("a < b", a="x", b="y")
    # booleans: a string against TRUE is Boolean.valueOf; a boolean against a number is -1
    assert matches("(a > 1) = TRUE", a="2") and matches("(a > 1) = 'true'", a="2")
    assert not matches("(a > 1) = 1", a="2") and matches("(a > 1) <> 1", a="2")
    assert matches("5 = 5.0") and matches("2 < 3000000000") and matches("'5' = 5")
    assert matches("- - 2 = 2") and ev("-a = 1", a="1") is None


def test_example_from_the_spec() -> None:
    f = compile_sql("a BETWEEN 1 AND 3 AND b IS NOT NULL")
    assert f({"a": "2", "b": "x"}) and not f({"a": "2"}) and not f({"a": "abc", "b": "x"})
    assert f.evaluate({"a": "2"}) is False


@pytest.mark.parametrize(
    ("expression", "position", "reason"),
    [
        ("a = NULL", 3, "NULL cannot be compared"),
        ("NULL <> a", 6, "NULL cannot be compared"),
        ("a > 'x'", 3, "cannot be compared"),
        ("a < TRUE", 3, "cannot be compared"),
        ("(a > 1) > 2", 9, "boolean value cannot be compared"),
        ("a BETWEEN 3 AND 1", 3, "low > high"),
        ("a BETWEEN 'a' AND 'b'", 3, "cannot be compared"),
        ("5", 1, "will not result in a boolean"),
        ("'x'", 1, "will not result in a boolean"),
        ("a = 1 AND 5", 11, "will not result in a boolean"),
        ("NOT 5", 5, "will not result in a boolean"),
        ("'x' IN ('a')", 5, "IN needs a property"),
        ("a IN (1)", 7, "expected a string literal"),
        ("a IN ()", 7, "expected a string literal"),
        ("a = 'x", 5, "unterminated string"),
        ("a = 1 /* no end", 7, "unterminated comment"),
        ("a = 0.0", 5, "below Double.MIN_VALUE"),
        ("a = 9223372036854775808", 5, "out of the long range"),
        ("a LIKE 'x'", 3, "unexpected 'LIKE'"),
        ("a = 1 + 2", 7, "unexpected '+'"),
        ("a.b = 1", 2, "unexpected character '.'"),
        ("(a = 1", 7, "expected ')'"),
        ("a = ", 5, "unexpected end of expression"),
        ("a IS 5", 6, "expected 'NULL'"),
        ("", 1, "empty expression"),
        ("a = 'x' b", 9, "unexpected 'b'"),
    ],
)
def test_errors_name_position_and_reason(expression: str, position: int, reason: str) -> None:
    with pytest.raises(FilterExpressionError) as err:
        compile_sql(expression)
    assert err.value.position == position, str(err.value)
    assert reason in err.value.reason
    assert f"at position {position}" in str(err.value)
    assert isinstance(err.value, ShmqError) and isinstance(err.value, ValueError)
