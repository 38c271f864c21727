"""What several commands share: the --seed form, the --set option, warnings."""

from __future__ import annotations

from typing import Optional

import click

from ..scenario import BraidError


def parse_seed(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        s = int(value, 0)
    except ValueError:
        raise BraidError("--seed", f"expected a non-negative integer, got {value!r}") from None
    if s < 0:
        raise BraidError("--seed", f"expected a non-negative integer, got {value}")
    if not 0 <= s < 2**64:
        raise BraidError("--seed", f"expected an integer between 0 and 2^64-1, got {value}")
    return s


set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help='Override a scenario value, e.g. --set switch.pfc.enabled=false --set \'traffic[0].size="1MB"\' '
    "(the value is read as TOML; a single bare word such as none or 1MB is taken as a string). Repeatable.",
)


def warn(msg: str) -> None:
    click.echo(f"warning: {msg}", err=True)
