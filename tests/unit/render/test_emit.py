"""The YAML writer of ``malaunch render``: block YAML that reads back as the same data."""

from __future__ import annotations

from typing import Any, Dict

import pytest
import yaml

from malaunch.render import emit

# Strings a YAML 1.1 or 1.2 reader would take for something else, or could not read bare.
TRICKY = [
    "", " ", " x", "x ", "yes", "No", "ON", "off", "y", "N", "true", "False", "null", "Null",
    "~", "1", "-1", "+1", "1.0", "1e3", ".5", "0x1F", "0o17", "017", "1_000", "12:30",
    "1:30:00", "2001-12-14", "2001-12-14t21:59:43.10-05:00", ".inf", "-.Inf", ".NaN", "nan",
    "-", "--", "---", "...", "- x", "? x", ": x", "a: b", "a:", "a #b", "#x", "&x", "*x",
    "!x", "!!str", "|", ">", "'q'", '"q"', "%x", "@x", "`x", "[x]", "{x}", "x,y", "a\\nb",
    "line\nbreak", "tab\there", "é", "车道线", "\u2028", "\x00", "<<", "=", "./train.py",
]  # fmt: skip
BARE = [
    "malaunch", "--framework", "torch_ddp", "-m", "/dev/shm", "huawei.com/Ascend910",
    "registry.example/train:1.0", "--port=23456", "a:b", "user@host", "RestartJob",
]  # fmt: skip


@pytest.mark.parametrize("text", TRICKY + BARE)
def test_every_string_reads_back_unchanged(text: str) -> None:
    document = {"key": text, "list": [text, {"k": text}], text or "empty": 1}
    assert yaml.safe_load(emit.dump(document)) == document


@pytest.mark.parametrize("text", BARE)
def test_plain_words_paths_and_options_stay_bare(text: str) -> None:
    assert emit.scalar(text) == text


@pytest.mark.parametrize("text", ["yes", "1", "12:30", "", "--", "a:"])
def test_lookalikes_are_double_quoted(text: str) -> None:
    assert emit.scalar(text) == f'"{text}"'


def test_block_layout() -> None:
    document: Dict[str, Any] = {
        "apiVersion": "v1",
        "spec": {"containers": [{"name": "a", "command": ["x", "-y"]}], "empty": {}},
        "plugins": {"env": [], "svc": []},
        "replicas": 2,
        "flag": True,
        "none": None,
        "nested": [[1, 2], []],
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
        "replicas: 2\n"
        "flag: true\n"
        "none: null\n"
        "nested:\n"
        "  - - 1\n"
        "    - 2\n"
        "  - []\n"
    )
    assert yaml.safe_load(emit.dump(document)) == document


def test_several_documents() -> None:
    text = emit.dump_all([{"a": 1}, {"b": [2]}])
    assert text == "---\na: 1\n---\nb:\n  - 2\n"
    assert list(yaml.safe_load_all(text)) == [{"a": 1}, {"b": [2]}]


def test_what_it_cannot_write() -> None:
    with pytest.raises(TypeError, match="cannot write a set as YAML"):
        emit.dump({"a": {1}})
    with pytest.raises(TypeError, match="a manifest key must be a string, got 1"):
        emit.dump({1: "a"})
    with pytest.raises(ValueError, match="a manifest number must be finite, got nan"):
        emit.dump({"a": float("nan")})
    assert emit.dump({"a": 0.5}) == "a: 0.5\n"
