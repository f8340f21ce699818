"""--stage-in/--stage-out values and the {node}/{rank} placeholders."""

from __future__ import annotations

import pytest

from malaunch.errors import ExitCode, UsageError
from malaunch.staging import StageMapping, expand, parse_pairs, per_node


def test_pairs_split_at_the_first_equals_sign() -> None:
    got = parse_pairs(["data=s3://b/p", "x = https://h/f?a=1&b=2"], "--stage-in")
    assert got == [
        StageMapping(local="data", url="s3://b/p", direction="in"),
        StageMapping(local="x", url="https://h/f?a=1&b=2", direction="in"),
    ]
    assert parse_pairs(["out=obs://b/o/"], "--stage-out")[0].direction == "out"
    assert str(got[0]) == "data <- s3://b/p"


@pytest.mark.parametrize("value", ["data", "=s3://b", "data=", " = ", ""])
def test_a_value_that_is_not_a_pair_is_64_naming_option_and_value(value: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_pairs([value], "--stage-out")
    assert caught.value.exit_code == ExitCode.USAGE
    assert (
        str(caught.value) == f"--stage-out {value!r}: expected LOCAL=URL (data=s3://bucket/prefix)"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("out/{host}=s3://b", "unknown placeholder {host}: expected {node} or {rank}"),
        ("out/{}=s3://b", "unknown placeholder {}"),
        ("out/{node!r}=s3://b", "unknown placeholder {node}"),
        ("out/{node=s3://b", "expected '}' before end of string"),
        ("out=s3://b/{0}", "unknown placeholder {0}"),
        ("out\0=s3://b", "NUL character"),
    ],
)
def test_bad_placeholders_are_64(value: str, message: str) -> None:
    with pytest.raises(UsageError, match="--stage-out") as caught:
        parse_pairs([value], "--stage-out")
    assert message in str(caught.value)


def test_expand_fills_both_sides() -> None:
    [mapping] = parse_pairs(["out/{node}/r{rank}=s3://b/{node}/{{x}}"], "--stage-out")
    assert per_node(mapping)
    got = expand(mapping, node_rank=3, rank=24)
    assert (got.local, got.url) == ("out/3/r24", "s3://b/3/{x}")


def test_rank_must_be_known_when_used() -> None:
    [mapping] = parse_pairs(["out/{rank}=s3://b"], "--stage-out")
    with pytest.raises(UsageError, match=r"\{rank\} is not known"):
        expand(mapping, node_rank=0, rank=None)
    [plain] = parse_pairs(["out/{node}=s3://b"], "--stage-out")
    assert expand(plain, node_rank=1, rank=None).local == "out/1"


def test_a_shared_output_names_no_node() -> None:
    [mapping] = parse_pairs(["out=s3://b/{node}"], "--stage-out")
    assert not per_node(mapping)
