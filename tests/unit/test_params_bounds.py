"""malaunch.params.Integer: a refused value is told the whole range it must be in."""

from __future__ import annotations

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.params import Integer


def _refusal(kind: Integer, value: str) -> str:
    with pytest.raises(click.BadParameter) as info:
        kind.convert(value, None, None)
    return info.value.message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "'abc': expected an integer from 1 to 65535"),
        ("0", "'0': expected an integer from 1 to 65535"),
        ("65536", "'65536': expected an integer from 1 to 65535"),
        ("1_0", "'1_0': expected an integer from 1 to 65535"),
        ("", "'': expected an integer from 1 to 65535"),
    ],
)
def test_a_port_refusal_names_both_bounds(value: str, message: str) -> None:
    assert _refusal(Integer(1, 65535), value) == message


@settings(derandomize=True, max_examples=200)
@given(
    minimum=st.integers(0, 10**6),
    span=st.integers(0, 10**6),
    value=st.text(max_size=30),
)
def test_every_refusal_names_the_range(minimum: int, span: int, value: str) -> None:
    kind = Integer(minimum, minimum + span)
    text = value.strip()
    if text.isascii() and text.isdigit() and minimum <= int(text) <= minimum + span:
        assert kind.convert(text, None, None) == int(text)
        return
    assert _refusal(kind, text).endswith(
        f": expected an integer from {minimum} to {minimum + span}"
    )
