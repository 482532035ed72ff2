"""How the benchmarks print a measured number: thousands separated, one decimal below 100."""

from __future__ import annotations


def num(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"
