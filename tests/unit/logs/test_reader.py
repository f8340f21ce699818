"""One log cut into blocks of lines that share an arrival time: which chunk a line starts in,
lines held back until whole, overlong lines, bad UTF-8, replaced files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import pytest

from malaunch.logs import reader as reader_module
from malaunch.logs.discover import RankLog
from malaunch.logs.index import Record
from malaunch.logs.reader import INF, Block, LogReader, block_key

Lines = List[Tuple[Optional[float], str]]


def make_reader(path: Path, records: Sequence[Record] = ()) -> LogReader:
    log = RankLog(node=0, file_id=0, path=path, role="worker", rank=0, local_rank=0)
    reader = LogReader(log, (0, "", 0))
    reader.add_records(list(records))
    return reader


def lines(blocks: Sequence[Block]) -> Lines:
    return [(b.time, line) for b in blocks for line in b.text.split("\n")[:-1]]


def read(reader: LogReader, final: bool = True) -> List[Block]:
    return list(reader.blocks(reader.size(), final))


def test_a_line_takes_the_time_of_the_chunk_it_starts_in(tmp_path: Path) -> None:
    path = tmp_path / "log"
    # chunks: "a\nb" at 1.0, "b\nc\n" at 2.0 (b straddles), "d\n" at 3.0
    path.write_bytes(b"a\nbb\nc\nd\n")
    reader = make_reader(path, [(0, 1.0), (3, 2.0), (7, 3.0)])
    assert lines(read(reader)) == [(1.0, "a"), (1.0, "bb"), (2.0, "c"), (3.0, "d")]


def test_lines_of_one_chunk_are_one_block(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"1\n2\n3\n4\n")
    blocks = read(make_reader(path, [(0, 1.0), (4, 2.0)]))
    assert [b.text for b in blocks] == ["1\n2\n", "3\n4\n"]
    assert [b.seq for b in blocks] == [1, 2]


def test_several_chunks_inside_one_line_give_it_the_first_and_the_next_the_last(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"long line\nnext\n")
    reader = make_reader(path, [(0, 1.0), (2, 2.0), (5, 3.0), (10, 4.0)])
    assert lines(read(reader)) == [(1.0, "long line"), (4.0, "next")]
    reader = make_reader(path, [(0, 1.0), (2, 2.0), (5, 3.0)])
    assert lines(read(reader)) == [(1.0, "long line"), (3.0, "next")]


def test_a_log_without_records_has_no_times(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"x\ny\n")
    blocks = read(make_reader(path))
    assert lines(blocks) == [(None, "x"), (None, "y")]
    assert block_key(blocks[0])[0] == INF


def test_lines_before_the_first_record_take_its_time(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"old\nnew\n")
    assert lines(read(make_reader(path, [(4, 5.0)]))) == [(5.0, "old"), (5.0, "new")]


def test_time_never_goes_back_within_a_log(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\nb\nc\n")
    reader = make_reader(path, [(0, 5.0), (2, 4.0), (4, 6.0)])  # the wall clock stepped back
    assert [t for t, _ in lines(read(reader))] == [5.0, 5.0, 6.0]


def test_an_unfinished_line_waits_when_following_and_comes_whole(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"one\ntw")
    reader = make_reader(path, [(0, 1.0), (4, 2.0)])
    assert lines(read(reader, final=False)) == [(1.0, "one")]
    assert read(reader, final=False) == []
    with open(path, "ab") as log:
        log.write(b"o\nthree")
    reader.add_records([(6, 3.0)])
    assert lines(read(reader, final=False)) == [(2.0, "two")]
    assert lines(read(reader, final=True)) == [(3.0, "three")]
    assert read(reader, final=True) == []


def test_reading_once_prints_an_unfinished_last_line(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\nno newline")
    assert lines(read(make_reader(path, [(0, 1.0)]))) == [(1.0, "a"), (1.0, "no newline")]


def test_only_bytes_up_to_the_limit_are_read(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\nb\nc\n")
    reader = make_reader(path, [(0, 1.0)])
    reader.size()
    assert lines(list(reader.blocks(4, final=False))) == [(1.0, "a"), (1.0, "b")]
    assert lines(read(reader)) == [(1.0, "c")]


def test_an_overlong_line_is_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_module, "READ_SIZE", 8)
    path = tmp_path / "log"
    path.write_bytes(b"0123456789abcdef\nxy\n")
    texts = [line for _, line in lines(read(make_reader(path, [(0, 1.0)]), final=False))]
    assert texts == ["01234567", "89abcdef", "xy"]


def test_bad_utf8_is_replaced_and_cut_characters_survive_chunks(tmp_path: Path) -> None:
    path = tmp_path / "log"
    snow = "\u2603".encode()
    path.write_bytes(b"bad \xff\xfe end\n" + snow + b" ok\n")
    # A chunk boundary inside the snowman's three bytes does not cut the line's text.
    reader = make_reader(path, [(0, 1.0), (len(b"bad \xff\xfe end\n") + 1, 2.0)])
    assert [line for _, line in lines(read(reader))] == ["bad \ufffd\ufffd end", "\u2603 ok"]


def test_a_file_replaced_under_its_name_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"first run\n")
    reader = make_reader(path, [(0, 1.0)])
    assert len(read(reader)) == 1
    os.unlink(path)
    path.write_bytes(b"second\n")
    assert [line for _, line in lines(read(reader))] == ["second"]


def test_a_truncated_file_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a long first line\n")
    reader = make_reader(path, [(0, 1.0)])
    read(reader)
    with open(path, "r+b") as log:
        log.truncate(0)
        log.write(b"b\n")
    assert [line for _, line in lines(read(reader))] == ["b"]


def test_a_missing_file_has_size_zero_until_it_appears(tmp_path: Path) -> None:
    path = tmp_path / "later.log"
    reader = make_reader(path, [(0, 1.0)])
    assert read(reader) == []
    path.write_bytes(b"here\n")
    assert lines(read(reader)) == [(1.0, "here")]


def test_applied_records_are_trimmed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_module, "TRIM_AT", 2)
    path = tmp_path / "log"
    path.write_bytes(b"a\nb\nc\nd\n")
    reader = make_reader(path, [(0, 1.0), (2, 2.0), (4, 3.0), (6, 4.0), (8, 5.0)])
    assert [t for t, _ in lines(read(reader))] == [1.0, 2.0, 3.0, 4.0]
    assert reader.records == [(8, 5.0)] and reader.applied == 0
