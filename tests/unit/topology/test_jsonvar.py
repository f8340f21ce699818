"""JSON variables (malaunch.topology.jsonvar): every failure of json.loads is one TopologyError."""

from __future__ import annotations

import pytest

from malaunch.errors import TopologyError
from malaunch.topology.jsonvar import MAX_JSON_INT_DIGITS, MAX_JSON_VARIABLE, load_json

HUGE = "9" * 5000


def refused(raw: str) -> str:
    with pytest.raises(TopologyError) as info:
        load_json({"V": raw}, "V")
    return str(info.value)


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (HUGE, "V"),
        ("-" + HUGE, "V"),
        ('{"task": {"type": "worker", "index": ' + HUGE + "}}", "V: task.index"),
        ('{"cluster": {"worker": ["w0:1", ' + HUGE + "]}}", "V: cluster.worker[1]"),
        ('{"a b": [[1], {"c": ' + HUGE + "}]}", 'V: ["a b"][1].c'),
    ],
)
def test_integers_past_the_conversion_limit_are_named_by_json_path(raw: str, where: str) -> None:
    assert refused(raw) == f"{where}: an integer of 5000 digits (at most {MAX_JSON_INT_DIGITS})"


def test_the_first_long_integer_is_named() -> None:
    raw = '{"a": [1, ' + HUGE + "], " + '"b": ' + "8" * 4400 + "}"
    assert refused(raw).startswith("V: a[1]: an integer of 5000 digits")


def test_integers_up_to_the_limit_and_floats_are_read() -> None:
    assert load_json({"V": "9" * MAX_JSON_INT_DIGITS}, "V") == int("9" * MAX_JSON_INT_DIGITS)
    assert load_json({"V": '{"a": [1, -2, 1.5e3]}'}, "V") == {"a": [1, -2, 1500.0]}


def test_syntax_nesting_and_size() -> None:
    assert refused("{").startswith("V is not valid JSON (Expecting property name")
    assert refused("[" * 100_000) == "V is not valid JSON (nested too deeply to read)"
    assert refused(" " * (MAX_JSON_VARIABLE + 1)).startswith(
        f"V is {MAX_JSON_VARIABLE + 1} characters, more than {MAX_JSON_VARIABLE}"
    )
