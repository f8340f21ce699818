"""The line index read as it grows: records by file, a record half written, a new run."""

from __future__ import annotations

import os
from pathlib import Path

from malaunch.logs.index import IndexTail
from malaunch.supervisor.runlog import RECORD


def append(path: Path, *records: bytes) -> None:
    with open(path, "ab") as index:
        index.write(b"".join(records))


def test_records_come_grouped_by_file_and_only_once(tmp_path: Path) -> None:
    path = tmp_path / "index.bin"
    append(path, RECORD.pack(0, 0, 1.0), RECORD.pack(1, 0, 1.5), RECORD.pack(0, 10, 2.0))
    tail = IndexTail(path)
    assert tail.read_new() == (False, {0: [(0, 1.0), (10, 2.0)], 1: [(0, 1.5)]})
    assert tail.read_new() == (False, {})
    append(path, RECORD.pack(1, 7, 3.0))
    assert tail.read_new() == (False, {1: [(7, 3.0)]})


def test_a_record_being_written_waits_for_its_last_bytes(tmp_path: Path) -> None:
    path = tmp_path / "index.bin"
    record = RECORD.pack(2, 64, 5.25)
    append(path, record[:7])
    tail = IndexTail(path)
    assert tail.read_new() == (False, {})
    append(path, record[7:])
    assert tail.read_new() == (False, {2: [(64, 5.25)]})


def test_no_index_is_no_records(tmp_path: Path) -> None:
    assert IndexTail(tmp_path / "missing.bin").read_new() == (False, {})


def test_a_new_run_replacing_the_index_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "index.bin"
    append(path, RECORD.pack(0, 0, 1.0), RECORD.pack(0, 5, 2.0))
    tail = IndexTail(path)
    tail.read_new()
    os.unlink(path)  # what a launcher reusing the directory does first
    append(path, RECORD.pack(0, 0, 9.0), RECORD.pack(0, 3, 9.5), RECORD.pack(0, 8, 9.75))
    assert tail.read_new() == (True, {0: [(0, 9.0), (3, 9.5), (8, 9.75)]})
    assert tail.read_new() == (False, {})


def test_a_truncated_index_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "index.bin"
    append(path, RECORD.pack(0, 0, 1.0), RECORD.pack(0, 5, 2.0))
    tail = IndexTail(path)
    tail.read_new()
    path.write_bytes(RECORD.pack(3, 0, 4.0))  # same file, truncated and rewritten
    assert tail.read_new() == (True, {3: [(0, 4.0)]})


def test_a_large_index_is_read_whole_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "index.bin"
    count = 120_000  # more than one READ_SIZE
    path.write_bytes(b"".join(RECORD.pack(i % 3, i, float(i)) for i in range(count)))
    replaced, records = IndexTail(path).read_new()
    assert not replaced
    assert sum(len(found) for found in records.values()) == count
    assert records[1][:2] == [(1, 1.0), (4, 4.0)]
