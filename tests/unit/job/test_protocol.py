"""The job channel's wire format: token, challenge proof, bounded JSON lines."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

from malaunch.job.protocol import (
    MAX_MESSAGE,
    LineReader,
    ProtocolError,
    derive_token,
    encode,
    nonce_ok,
    parse,
    proof,
    proof_ok,
    welcome_proof,
    welcome_proof_ok,
)

IDENTITY: List[object] = ["job-1", 2, 16, 29500, None]
BASE: Dict[str, Any] = {"identity": IDENTITY, "port": 29501, "secret": ""}


def token_of(**changes: Any) -> bytes:
    args = {**BASE, **changes}
    return derive_token(args["identity"], args["port"], args["secret"])


# -- derive_token -------------------------------------------------------------------------


def test_token_is_the_same_for_the_same_job() -> None:
    first = token_of()
    assert first == token_of()
    # A tuple is the same identity as a list of the same values.
    assert first == token_of(identity=tuple(IDENTITY))
    assert isinstance(first, bytes)
    assert len(first) == 32  # SHA-256


@pytest.mark.parametrize(
    "changes",
    [
        {"identity": ["job-2", 2, 16, 29500, None]},
        {"identity": [None, 2, 16, 29500, None]},
        {"identity": ["job-1", 3, 16, 29500, None]},
        {"identity": ["job-1", 2, 8, 29500, None]},
        {"identity": ["job-1", 2, 16, 29502, None]},
        {"identity": ["job-1", 2, 16, 29500, "192.0.2.11"]},
        {"port": 29502},
        {"secret": "s3cret"},
    ],
)
def test_token_changes_with_any_input(changes: Dict[str, Any]) -> None:
    assert token_of(**changes) != token_of()


def test_token_does_not_confuse_fields() -> None:
    # Moving text from one field to another must not give the same material.
    assert derive_token(["a", "b"], 1) != derive_token(["a,b"], 1)
    assert derive_token([None], 1) != derive_token(["None"], 1)
    assert derive_token(["x"], 1, "") != derive_token([], 1, "x")


# -- proof / proof_ok ---------------------------------------------------------------------


def test_right_answer_is_accepted() -> None:
    token = token_of()
    answer = proof(token, "abc123", 1)
    assert isinstance(answer, str)
    assert len(answer) == 64  # hex SHA-256
    assert proof_ok(token, "abc123", 1, answer)


def test_answer_for_another_node_is_rejected() -> None:
    token = token_of()
    assert not proof_ok(token, "abc123", 2, proof(token, "abc123", 1))


def test_answer_for_another_nonce_is_rejected() -> None:
    token = token_of()
    assert not proof_ok(token, "abc124", 1, proof(token, "abc123", 1))


def test_answer_with_another_token_is_rejected() -> None:
    assert not proof_ok(token_of(), "n", 1, proof(token_of(secret="x"), "n", 1))


@pytest.mark.parametrize("answer", [None, 1, 1.5, b"", ["x"], {"proof": "x"}, True])
def test_non_string_answer_is_rejected(answer: object) -> None:
    assert not proof_ok(token_of(), "abc123", 1, answer)


@pytest.mark.parametrize("answer", ["", "0" * 64, "zz", "not hex at all"])
def test_wrong_string_answer_is_rejected(answer: str) -> None:
    assert not proof_ok(token_of(), "abc123", 1, answer)


def test_non_ascii_answer_is_rejected() -> None:
    # A stranger controls the answer: JSON "\u00e9" arrives as a non-ASCII str. It must be
    # a plain "wrong answer", not an exception out of the handshake.
    answer = json.loads('"\\u00e9"')
    assert not proof_ok(token_of(), "abc123", 1, answer)


# -- the welcome's proof (node 0 authenticates itself) ----------------------------------


def test_welcome_proof_is_accepted_for_its_nonce_only() -> None:
    token = token_of()
    answer = welcome_proof(token, "ab" * 16)
    assert len(answer) == 64
    assert welcome_proof_ok(token, "ab" * 16, answer)
    assert not welcome_proof_ok(token, "cd" * 16, answer)
    assert not welcome_proof_ok(token_of(secret="x"), "ab" * 16, answer)


@pytest.mark.parametrize("answer", [None, "", "0" * 64, 7, json.loads('"\\u00e9"')])
def test_a_welcome_without_the_right_proof_is_refused(answer: object) -> None:
    assert not welcome_proof_ok(token_of(), "ab" * 16, answer)


def test_no_node_answer_is_a_welcome_proof() -> None:
    # A program posing as node 0 can make a node answer any challenge: sending the node's own
    # nonce back must not give it the welcome proof for that nonce.
    token, nonce = token_of(), "ab" * 16
    answers = {proof(token, nonce, node) for node in range(0, 64)}
    assert welcome_proof(token, nonce) not in answers


@pytest.mark.parametrize(
    ("nonce", "ok"),
    [
        ("0123456789abcdef", True),
        ("f" * 128, True),
        ("0123456789abcde", False),  # too short to be a nonce
        ("f" * 129, False),
        ("0123456789ABCDEF", False),
        ("0123456789abcdeg", False),
        (None, False),
        (1234567890123456, False),
        (["ab"] * 8, False),
    ],
)
def test_nonce_ok(nonce: object, ok: bool) -> None:
    assert nonce_ok(nonce) is ok


# -- encode -------------------------------------------------------------------------------


def test_encode_is_one_compact_json_line() -> None:
    data = encode({"t": "start", "attempt": 2, "x": [1, {"y": "é"}]})
    assert data == b'{"t":"start","attempt":2,"x":[1,{"y":"\\u00e9"}]}\n'
    assert data.count(b"\n") == 1
    assert json.loads(data) == {"t": "start", "attempt": 2, "x": [1, {"y": "é"}]}


def test_encode_escapes_newlines_inside_strings() -> None:
    data = encode({"t": "x", "text": "a\nb"})
    assert data.count(b"\n") == 1
    assert data.endswith(b"\n")


def test_encode_accepts_exactly_max_message() -> None:
    overhead = len(encode({"t": "x", "p": ""}))
    data = encode({"t": "x", "p": "a" * (MAX_MESSAGE - overhead)})
    assert len(data) == MAX_MESSAGE


def test_encode_refuses_a_message_over_max_message() -> None:
    overhead = len(encode({"t": "x", "p": ""}))
    with pytest.raises(ValueError, match=r"message 'x' is 65537 bytes \(max 65536\)"):
        encode({"t": "x", "p": "a" * (MAX_MESSAGE - overhead + 1)})


# -- LineReader ---------------------------------------------------------------------------


def test_message_split_across_chunks() -> None:
    reader = LineReader()
    data = encode({"t": "hello", "node": 1, "proof": "ab"})
    got: List[Dict[str, Any]] = []
    for i in range(len(data)):
        got.extend(reader.feed(data[i : i + 1]))
        if i < len(data) - 1:
            assert got == []
    assert got == [{"t": "hello", "node": 1, "proof": "ab"}]
    assert reader.buffer == b""
    assert reader.dropped == []


def test_several_messages_in_one_chunk_and_a_partial_one() -> None:
    reader = LineReader()
    data = encode({"t": "a"}) + encode({"t": "b", "n": 2}) + b'{"t":"c"'
    assert list(reader.feed(data)) == [{"t": "a"}, {"t": "b", "n": 2}]
    assert reader.buffer == b'{"t":"c"'
    assert list(reader.feed(b"}\n")) == [{"t": "c"}]
    assert reader.buffer == b""


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"[1, 2, 3]",
        b'"t"',
        b"42",
        b"null",
        b"{}",
        b'{"t": 1}',
        b'{"t": null}',
        b'{"type": "start"}',
        b'{"t": "x"',
        b"\xff\xfe{",
        b"",
        b"[" * 60000,  # deeply nested, but under MAX_MESSAGE
        b'{"a":' * 10000,
    ],
)
def test_malformed_line_is_dropped_and_the_next_one_delivered(line: bytes) -> None:
    reader = LineReader()
    got = list(reader.feed(line + b"\n" + encode({"t": "ok"})))
    assert got == [{"t": "ok"}]
    assert len(reader.dropped) == 1
    assert reader.dropped[0] == f"not a JSON object with a type: {line[:60]!r}"


def test_each_malformed_line_gets_its_own_reason() -> None:
    reader = LineReader()
    got = list(reader.feed(b"one\n[2]\n" + encode({"t": "ok"}) + b"{}\n"))
    assert got == [{"t": "ok"}]
    assert reader.dropped == [
        "not a JSON object with a type: b'one'",
        "not a JSON object with a type: b'[2]'",
        "not a JSON object with a type: b'{}'",
    ]


def test_deeply_nested_line_over_max_message_is_a_protocol_error() -> None:
    # '[' * 100000 is longer than MAX_MESSAGE: too long comes before malformed.
    reader = LineReader()
    with pytest.raises(ProtocolError, match="a line longer than 65536 bytes"):
        list(reader.feed(b"[" * 100000 + b"\n" + encode({"t": "ok"})))


def test_line_of_max_message_bytes_is_still_read() -> None:
    reader = LineReader()
    body = b'{"t":"x","p":"' + b"a" * (MAX_MESSAGE - 16) + b'"}'
    assert len(body) == MAX_MESSAGE
    assert list(reader.feed(body)) == []  # waits for the newline
    assert list(reader.feed(b"\n")) == [{"t": "x", "p": "a" * (MAX_MESSAGE - 16)}]


def test_too_long_line_without_newline_is_a_protocol_error() -> None:
    reader = LineReader()
    assert list(reader.feed(b"a" * MAX_MESSAGE)) == []
    with pytest.raises(ProtocolError, match="a line longer than 65536 bytes"):
        list(reader.feed(b"a"))


def test_too_long_line_with_newline_is_a_protocol_error() -> None:
    reader = LineReader()
    with pytest.raises(ProtocolError, match="a line longer than 65536 bytes"):
        list(reader.feed(b"a" * (MAX_MESSAGE + 1) + b"\n"))


def test_messages_before_a_too_long_line_are_delivered_first() -> None:
    reader = LineReader()
    got: List[Dict[str, Any]] = []
    with pytest.raises(ProtocolError):
        for message in reader.feed(encode({"t": "a"}) + b"b" * (MAX_MESSAGE + 1)):
            got.append(message)
    assert got == [{"t": "a"}]


# -- parse --------------------------------------------------------------------------------


def test_parse_a_message() -> None:
    assert parse(b'{"t":"stop","final":true,"failure":{"code":3}}') == {
        "t": "stop",
        "final": True,
        "failure": {"code": 3},
    }
    assert parse(b' {"t": ""} \r') == {"t": ""}


@pytest.mark.parametrize(
    "line", [b"", b"x", b"[]", b'["t"]', b'{"t":2}', b'{"t":["x"]}', b"[" * 5000, b"1" * 5000]
)
def test_parse_returns_none_for_anything_else(line: bytes) -> None:
    assert parse(line) is None


def test_a_reader_told_to_stop_at_a_drop_reads_no_further() -> None:
    reader = LineReader()
    got = list(reader.feed(b"{}\n" * 1000 + b'{"t":"hello"}\n', stop_at_drop=True))
    assert got == []
    assert len(reader.dropped) == 1
    reader = LineReader()
    assert list(reader.feed(b'{"t":"hello"}\n{}\n{"t":"ping"}\n')) == [
        {"t": "hello"},
        {"t": "ping"},
    ]
