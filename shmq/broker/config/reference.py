"""README.md's "Configuration reference", rendered from the config classes.

Each key's default is the dataclass field's and its meaning the field's ``doc`` (see
``shmq.config.setting``); the keys that are accepted and ignored come from
``shmq.broker.config.rocketmq_keys``. The README section is this module's output, and a test
compares the two, so the documentation cannot drift from the code. After changing a key:

    python -m shmq.broker.config.reference --write README.md
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from typing import Any

from shmq.broker.config.broker_config import NOT_KEYS, BrokerConfig, camel_case
from shmq.broker.config.rocketmq_keys import IGNORED_GROUPS
from shmq.config import MessageStoreConfig

HEADING = "## Configuration reference"
REGENERATE = "python -m shmq.broker.config.reference --write README.md"


def render() -> str:
    """The whole README section, from its heading to its last line (newline-terminated)."""
    lines = [
        HEADING,
        "",
        "<!-- Generated from the config classes (shmq/broker/config/broker_config.py,",
        f"shmq/config.py, shmq/broker/config/rocketmq_keys.py) by `{REGENERATE}`; a test",
        "checks it. -->",
        "",
        "Every key a broker.conf (or a TOML file) may set, as `shmq broker -c` and `shmq start "
        "-c` read it: RocketMQ's names, or their snake_case. Sizes are in bytes and intervals "
        "in milliseconds unless the key or its meaning says otherwise.",
        "",
        "### Broker keys",
        "",
        *_table(BrokerConfig),
        "",
        "### Store keys",
        "",
        *_table(MessageStoreConfig),
        "",
        "### Accepted and ignored",
        "",
        "These RocketMQ 4.9 keys load with one warning line each (RocketMQ's sample configs "
        "hold some of them) and change nothing, because:",
        "",
        *(f"- {', '.join(f'`{k}`' for k in keys)}: {why}." for why, keys in IGNORED_GROUPS),
        "",
        "Any other name is refused with the nearest key suggested, e.g. `brokerNmae` (did you "
        "mean `brokerName`?).",
    ]
    return "\n".join(lines) + "\n"


def _table(cls: type) -> list[str]:
    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        if f.name in NOT_KEYS:
            continue
        doc = f.metadata.get("doc")
        if not doc:
            raise ValueError(f"{cls.__name__}.{f.name} has no doc: declare it with setting()")
        shown = f.metadata.get("shown") or _default_text(f.default)
        rows.append(f"| `{camel_case(f.name)}` | {shown} | {doc.replace('|', '&#124;')} |")
    return rows


def _default_text(value: Any) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`" if value != "" else "(none)"


def readme_section(text: str) -> str | None:
    """The Configuration reference section of README text ``text``: from its heading to the
    next heading of its level (or the end), or None when it has none."""
    match = re.search(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", text, flags=re.M | re.S)
    return match.group(0) if match else None


def main(argv: list[str] | None = None) -> int:
    """Print the section, or with ``--write README.md`` replace the one in that file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="README", help="replace the section in this file")
    args = parser.parse_args(argv)
    if not args.write:
        sys.stdout.write(render())
        return 0
    with open(args.write, encoding="utf-8") as f:
        text = f.read()
    old = readme_section(text)
    if old is None:
        print(f"{args.write} has no {HEADING!r} section to replace", file=sys.stderr)
        return 1
    new = render() + ("\n" if old.endswith("\n\n") else "")
    with open(args.write, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
