"""Reading a rank's torchelastic error file (what ``@record`` writes): the structured error,
and every way the file can be broken, since the process that wrote it is not trusted."""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import Any, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.supervisor.errorfile import (
    MAX_FILE,
    MAX_LINE,
    MAX_MESSAGE,
    error_lines,
    parse_error,
    read_error_file,
    split_message,
)

STACK = """Traceback (most recent call last):
  File "/job/train.py", line 30, in <module>
    main()
  File "/venv/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "/job/train.py", line 12, in step
    raise ValueError(f"bad batch {n}")
ValueError: bad batch 7
"""


def record_document(message: str, stack: str = STACK, timestamp: Any = "1700000000") -> Any:
    """What torch 2.13's ErrorHandler.record_exception writes."""
    extra = {"py_callstack": stack, "timestamp": timestamp}
    return {"message": {"message": message, "extraInfo": extra}}


def write(path: Path, document: Any) -> str:
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def test_record_format(tmp_path: Path) -> None:
    path = write(tmp_path / "e.json", record_document("ValueError: bad batch 7"))
    error = read_error_file(path)
    assert error is not None
    assert error["type"] == "ValueError"
    assert error["message"] == "bad batch 7"
    assert error["frame"] == 'File "/job/train.py", line 12, in step'
    assert error["code"] == 'raise ValueError(f"bad batch {n}")'
    assert error["timestamp"].startswith("2023-11-1")  # 1700000000 in any local time zone
    assert error["file"] == path


def test_torchrun_copy_with_an_error_code_and_the_newer_text_form() -> None:
    copied = record_document("RuntimeError: x")
    copied["message"]["errorCode"] = 1  # what torchrun's agent adds when it copies the file
    assert parse_error(copied) == {
        "type": "RuntimeError",
        "message": "x",
        "frame": 'File "/job/train.py", line 12, in step',
        "code": 'raise ValueError(f"bad batch {n}")',
        "timestamp": parse_error(record_document("y"))["timestamp"],  # type: ignore[index]
    }
    newer = parse_error({"message": "OSError: disk full", "timestamp": 1700000000})
    assert newer is not None
    assert (newer["type"], newer["message"], newer["frame"]) == ("OSError", "disk full", None)


def test_a_real_traceback_gives_its_last_frame() -> None:
    def inner() -> None:
        raise KeyError("missing")

    try:
        inner()
    except KeyError:
        stack = traceback.format_exc()
    error = parse_error(record_document("KeyError: 'missing'", stack))
    assert error is not None
    assert error["frame"] is not None
    assert error["frame"].endswith(", in inner")
    assert error["code"] == 'raise KeyError("missing")'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ValueError: boom", ("ValueError", "boom")),
        ("ValueError: ", ("ValueError", "")),
        ("ValueError:", ("ValueError", "")),
        ("mod.sub.MyError: a: b", ("mod.sub.MyError", "a: b")),
        ("no type here", (None, "no type here")),
        ("two words: x", (None, "two words: x")),
    ],
)
def test_split_message(text: str, expected: Any) -> None:
    assert split_message(text) == expected


def test_no_file_means_no_error(tmp_path: Path) -> None:
    assert read_error_file(None) is None
    assert read_error_file(str(tmp_path / "absent.json")) is None


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (
            b'{"message": {"message": "E: x", "extraInfo": {"timestamp": ' + b"9" * 5000 + b"}}}",
            "integer of 5000 digits",
        ),
        (b'{"message": 3}', "not torchelastic's error format"),
        (b"[]", "not torchelastic's error format"),
    ],
)
def test_malformed_files_are_ignored_with_a_warning(
    tmp_path: Path, content: bytes, why: str, messages: List[str]
) -> None:
    path = tmp_path / "e.json"
    path.write_bytes(content)
    assert read_error_file(str(path)) is None
    assert any(why in line and str(path) in line for line in messages)


def test_a_fifo_or_a_huge_file_is_never_read(tmp_path: Path, messages: List[str]) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # an open() without O_NONBLOCK would wait for a writer forever
    assert read_error_file(str(fifo)) is None
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:
        handle.truncate(MAX_FILE + 1)
    assert read_error_file(str(huge)) is None
    assert any("not a regular file" in line for line in messages)
    assert any(f"more than {MAX_FILE}" in line for line in messages)


def test_long_values_are_cut() -> None:
    error = parse_error(
        record_document("E: " + "m" * 10_000, f'  File "{"f" * 5000}", line 1, in g')
    )
    assert error is not None
    assert len(error["message"]) == MAX_MESSAGE and error["message"].endswith("...")
    assert len(error["frame"]) == MAX_LINE


@pytest.mark.parametrize("stamp", ["-1", "abc", 2**60, 1e300, True, None, "9" * 40])
def test_impossible_timestamps_are_left_out(stamp: Any) -> None:
    error = parse_error(record_document("E: x", timestamp=stamp))
    assert error is not None and error["timestamp"] is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["message", "extraInfo", "timestamp", "py_callstack", "x"]),
                      children, max_size=4),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=300, derandomize=True)
@given(JSON)
def test_any_json_document_gives_an_error_or_none_never_an_exception(document: Any) -> None:
    error = parse_error(document)
    if error is not None:
        assert isinstance(error["message"], str) and len(error["message"]) <= MAX_MESSAGE
        assert all(error[k] is None or isinstance(error[k], str) for k in ("type", "frame"))
        assert error_lines(error)


def test_error_lines() -> None:
    error = parse_error(record_document("ValueError: bad batch 7"))
    assert error is not None
    lines = error_lines(error)
    assert lines[0].startswith("ValueError: bad batch 7 (at 2023-11-1")
    assert lines[1:] == [
        'File "/job/train.py", line 12, in step',
        '    raise ValueError(f"bad batch {n}")',
    ]
