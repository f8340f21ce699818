"""Strict click parameter types: integers in ASCII digits within a range, finite durations,
host names. The CLI's options use them, and framework plugins get them from
:mod:`malaunch.api` for their own options.

click's ``INT`` takes whatever ``int()`` takes (``1_0``, Arabic-Indic digits, 5,000 digits) and
``FLOAT`` takes ``nan`` and ``inf``; these go through :mod:`malaunch.numbers` instead. A bad value
fails with click's ``BadParameter``, which the CLI's error boundary turns into one line naming
the option, or its ``MALAUNCH_`` variable when the value came from there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import click

from malaunch.errors import TopologyError, UsageError
from malaunch.numbers import MAX_DIGITS, MAX_SECONDS, parse_int, parse_seconds
from malaunch.topology.envparse import parse_host

# click 8.2+ makes ParamType generic; Python 3.9 gets click 8.1, where it is not subscriptable.
if TYPE_CHECKING:
    IntType = click.ParamType[int]
    FloatType = click.ParamType[float]
    StrType = click.ParamType[str]
else:
    IntType = FloatType = StrType = click.ParamType


class Integer(IntType):
    """An integer in ``[minimum, maximum]``, digits 0-9 only."""

    name = "integer"

    def __init__(self, minimum: int = 0, maximum: int = 10**18 - 1) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def convert(
        self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]
    ) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # a default
        try:
            return parse_int(
                str(value),
                repr(str(value)),
                minimum=self.minimum,
                maximum=self.maximum,
                error=UsageError,
            )
        except UsageError as exc:
            message = str(exc)
            if self.maximum < 10**MAX_DIGITS - 1:
                # parse_int names the bound a value misses, or none for text such as "abc":
                # whoever types the option needs the whole range.
                expected = f"expected an integer from {self.minimum} to {self.maximum}"
                message = f"{str(value)!r}: {expected}"
            self.fail(message, param, ctx)


class Seconds(FloatType):
    """A finite number of seconds in ``[minimum, maximum]``."""

    name = "seconds"

    def __init__(self, minimum: float = 0.0, maximum: float = MAX_SECONDS) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def convert(
        self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]
    ) -> float:
        if isinstance(value, float):
            return value  # a default
        try:
            return parse_seconds(
                str(value), repr(str(value)), minimum=self.minimum, maximum=self.maximum
            )
        except UsageError as exc:
            self.fail(str(exc), param, ctx)


def port() -> Integer:
    return Integer(1, 65535)


class Host(StrType):
    """A host name, an IPv4 address, or an IPv6 address (with or without brackets)."""

    name = "host"

    def convert(
        self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]
    ) -> str:
        try:
            return parse_host(str(value), "")
        except TopologyError:
            self.fail(f"{str(value)!r} is not a host name or address", param, ctx)
