"""Strict click parameter types: integers in ASCII digits within a range, finite durations,
host names, text and paths that are never empty. The CLI's options use them, and framework
plugins get them from :mod:`malaunch.api` for their own options.

click's ``INT`` takes whatever ``int()`` takes (``1_0``, Arabic-Indic digits, 5,000 digits) and
``FLOAT`` takes ``nan`` and ``inf``; these go through :mod:`malaunch.numbers` instead. A bad value
fails with click's ``BadParameter``, which the CLI's error boundary turns into one line naming
the option, or its ``MALAUNCH_`` variable when the value came from there.

An empty value on the command line (``--restart-on ''``) is a slip of the shell (an unset
variable expanded) more often than a choice: :class:`Text` and :class:`Path` refuse it unless
the option says what it means (``empty_means``). An empty ``MALAUNCH_`` variable counts as
unset, as click reads them.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING, Any, Optional

import click

from malaunch.errors import TopologyError, UsageError
from malaunch.numbers import MAX_DIGITS, MAX_SECONDS, parse_int, parse_seconds
from malaunch.topology.envparse import parse_host
from malaunch.wording import did_you_mean

# click 8.2+ makes ParamType generic; Python 3.9 gets click 8.1, where it is not subscriptable.
if TYPE_CHECKING:
    IntType = click.ParamType[int]
    FloatType = click.ParamType[float]
    StrType = click.ParamType[str]
    ChoiceType = click.Choice[str]
else:
    IntType = FloatType = StrType = click.ParamType
    ChoiceType = click.Choice


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


class Text(StrType):
    """Text that is not empty, unless ``empty_means`` says what an empty value does."""

    name = "text"

    def __init__(self, empty_means: Optional[str] = None) -> None:
        self.empty_means = empty_means

    def convert(
        self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]
    ) -> str:
        text = str(value)
        if text == "" and self.empty_means is None:
            self.fail(EMPTY, param, ctx)
        return text


EMPTY = "expected a value, got an empty string"


class Path(click.Path):
    """click's path, refusing what can name no file: an empty value, or one longer than the
    system takes (``ENAMETOOLONG``: 255 bytes a name, 4,096 a path on Linux). Checked without
    opening anything, so a FIFO or a device costs nothing here."""

    def convert(
        self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]
    ) -> Any:
        text = os.fsdecode(value) if isinstance(value, (str, bytes, os.PathLike)) else value
        if text == "":
            self.fail(EMPTY, param, ctx)
        if isinstance(text, str):
            try:
                os.lstat(text)
            except OSError as exc:
                if exc.errno == errno.ENAMETOOLONG:
                    shown = f"{text[:100]}... ({len(text)} characters)"
                    self.fail(f"{shown}: {exc.strerror}", param, ctx)
            except ValueError:  # an embedded NUL: no system call takes it
                self.fail("a path cannot hold a NUL character", param, ctx)
        return super().convert(value, param, ctx)


class Choice(ChoiceType):
    """click's Choice, whose error is the same in every click version and names the closest
    choice when one is close (``volcan``: did you mean volcano?)."""

    def convert(
        self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]
    ) -> str:
        if isinstance(value, str) and value in self.choices:
            return value
        shown = ", ".join(str(choice) for choice in self.choices)
        hint = did_you_mean(str(value), [str(choice) for choice in self.choices])
        self.fail(f"{str(value)!r} is not one of {shown}{hint}", param, ctx)
