"""The YAML writer of ``malaunch render``: PyYAML, block YAML that both of PyYAML's loaders (pure
Python and libyaml) read back as the same data, whatever the text."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.render import emit

LOADERS: List[Any] = [yaml.SafeLoader, yaml.CSafeLoader]

# Strings a YAML 1.1 or 1.2 reader, or Go's (kubectl's), would take for something else, or
# could not read bare.
TRICKY = [
    "", " ", " x", "x ", "yes", "No", "ON", "off", "y", "N", "true", "False", "null", "Null",
    "~", "1", "-1", "+1", "1.0", "1e3", ".5", "0x1F", "0o17", "017", "1_000", "12:30",
    "1:30:00", "2001-12-14", "2001-12-14t21:59:43.10-05:00", ".inf", "-.Inf", ".NaN", "nan",
    "-inf", "+Infinity", "0b101", "1E-3",
    "-", "--", "---", "...", "- x", "? x", ": x", "a: b", "a:", "a #b", "#x", "&x", "*x",
    "!x", "!!str", "|", ">", "'q'", '"q"', "%x", "@x", "`x", "[x]", "{x}", "x,y", "a\\nb",
    "line\nbreak", "tab\there", "é", "车道线", "\u2028", "\x00", "<<", "=", "./train.py",
    "\U0001f600", "emoji \U0001f600 in text", "\x85", "a\r\nb", "\ufeff", "\x1b[31mred",
    "\n", "\n\n", " \n", "\nx", "x\n", "  two\n lines ", "\t\n", "\U0010ffff", "\ufffe",
]  # fmt: skip
# What YAML 1.2 (core schema) or Go's reader would read as a number, boolean or null.
LOOKALIKES = [
    "1e3", "1E-3", "0o17", "0x1F", "0b101", "y", "N", "yes", "off", "-inf", "+Infinity",
    ".nan", "nan", "1_000", "12:30", "~", "null", "",
]  # fmt: skip
BARE = [
    "malaunch", "--framework", "torch_ddp", "-m", "/dev/shm", "huawei.com/Ascend910",
    "registry.example/train:1.0", "--port=23456", "a:b", "user@host", "RestartJob", "--",
]  # fmt: skip


def loads(text: str) -> List[List[Any]]:
    """The documents as each PyYAML loader reads them."""
    return [list(yaml.load_all(text, Loader=loader)) for loader in LOADERS]


@pytest.mark.parametrize("text", TRICKY + BARE)
def test_every_string_reads_back_unchanged(text: str) -> None:
    document = {"key": text, "list": [text, {"k": text}], text or "empty": 1}
    assert loads(emit.dump_all([document])) == [[document], [document]]


@pytest.mark.parametrize("text", BARE)
def test_plain_words_paths_and_options_stay_bare(text: str) -> None:
    assert emit.dump({"k": text}) == f"k: {text}\n"


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalikes_are_quoted(text: str) -> None:
    """PyYAML's own rules are YAML 1.1's: ``1e3`` or ``0o17`` would be bare, and a YAML 1.2
    reader (or Go's) would read a number."""
    assert emit.dump({"k": text}) == f"k: '{text}'\n"


def test_a_character_outside_the_bmp_is_written_as_itself() -> None:
    """Never as a JSON surrogate pair (``\\ud83d\\ude00``), which libyaml and Go refuse."""
    text = emit.dump({"k": "run \U0001f600"})
    assert text == "k: run \U0001f600\n"
    assert yaml.load(text, Loader=yaml.CSafeLoader) == {"k": "run \U0001f600"}


def test_several_lines_are_a_literal_block() -> None:
    assert emit.dump({"k": "one\ntwo\n"}) == "k: |\n  one\n  two\n"
    assert emit.dump({"k": "one\ntwo"}) == "k: |-\n  one\n  two\n"


def test_control_characters_are_escaped_in_double_quotes() -> None:
    assert emit.dump({"k": "a\x1b[1mb\x00"}) == 'k: "a\\e[1mb\\0"\n'
    assert emit.dump({"k": "a\r\nb"}) == 'k: "a\\r\\nb"\n'
    assert emit.dump({"k": "a\u2028b"}) == 'k: "a\\Lb"\n'


def test_block_layout() -> None:
    shared = ["x", "-y"]
    document: Dict[str, Any] = {
        "apiVersion": "v1",
        "spec": {"containers": [{"name": "a", "command": shared}], "empty": {}},
        "plugins": {"env": [], "svc": []},
        "again": shared,  # the same list twice: written twice, no anchor and alias
        "replicas": 2,
        "flag": True,
        "none": None,
        "nested": [[1, 2], [], ("t", 3)],
    }
    assert emit.dump(document) == (
        "apiVersion: v1\n"
        "spec:\n"
        "  containers:\n"
        "    - name: a\n"
        "      command:\n"
        "        - x\n"
        "        - -y\n"
        "  empty: {}\n"
        "plugins:\n"
        "  env: []\n"
        "  svc: []\n"
        "again:\n"
        "  - x\n"
        "  - -y\n"
        "replicas: 2\n"
        "flag: true\n"
        "none: null\n"
        "nested:\n"
        "  - - 1\n"
        "    - 2\n"
        "  - []\n"
        "  - - t\n"
        "    - 3\n"
    )
    expected = {**document, "nested": [[1, 2], [], ["t", 3]]}
    assert loads(emit.dump_all([document])) == [[expected], [expected]]


def test_several_documents() -> None:
    text = emit.dump_all([{"a": 1}, {"b": [2]}])
    assert text == "---\na: 1\n---\nb:\n  - 2\n"
    assert loads(text) == [[{"a": 1}, {"b": [2]}]] * 2


def test_a_long_value_stays_on_one_line() -> None:
    value = " ".join(["--option=value"] * 200)
    assert emit.dump({"k": value}) == f"k: {value}\n"


def test_what_it_cannot_write() -> None:
    with pytest.raises(TypeError, match="cannot write a set as YAML"):
        emit.dump({"a": {1}})
    with pytest.raises(TypeError, match="a manifest key must be a string, got 1"):
        emit.dump({1: "a"})
    with pytest.raises(ValueError, match="a manifest number must be finite, got nan"):
        emit.dump({"a": float("nan")})
    assert emit.dump({"a": 0.5}) == "a: 0.5\n"


# Every Unicode scalar value: all planes, controls, NUL; not lone surrogates (no UTF-8 form:
# `malaunch render` refuses them, tests/e2e/test_render_text.py).
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
# The characters YAML treats specially, often.
YAML_SPECIAL = st.text(
    st.sampled_from(
        [
            *"\n\r \t#:-'\"|>?,[]{}&*!%@`~.01aAyn\x00\x07\x1b\x7f\x85\x9f\xa0",
            *("\u2028", "\u2029", "\ufeff", "\ufffe", "\U0001f600", "\U0010ffff", "é"),
        ]
    ),
    max_size=12,
)
VALUES = st.one_of(TEXT, YAML_SPECIAL)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(
    values=st.lists(VALUES, max_size=6),
    mapping=st.dictionaries(VALUES, VALUES, max_size=4),
)
def test_any_unicode_text_reads_back_exactly_with_both_loaders(
    values: List[str], mapping: Dict[str, str]
) -> None:
    document = {
        "command": values,
        "env": [{"name": key, "value": value} for key, value in mapping.items()],
        "data": mapping,
    }
    assert (
        loads(emit.dump_all([document, {"again": values}])) == [[document, {"again": values}]] * 2
    )
