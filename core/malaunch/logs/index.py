"""A line index (``malaunch-index.bin``) read as it grows.

Records are fixed-size (:data:`malaunch.supervisor.runlog.RECORD`): ``(file id, offset, arrival
time)``. The launcher appends a chunk's record *before* it writes the chunk to the log, so once
a log's size is known, reading the index after it gives a record for every byte up to that
size. A record still being written (fewer than 20 bytes) is left for the next read.
"""

from __future__ import annotations

import os
from pathlib import Path
from stat import S_ISREG
from typing import BinaryIO, Dict, List, Optional, Tuple

from malaunch.supervisor.runlog import RECORD

READ_SIZE = RECORD.size * 52_428  # about 1 MiB of records per read

Record = Tuple[int, float]  # (offset in the log file, arrival time)


class IndexTail:
    """The records of one index that have not been returned yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.position = 0
        # What tells a new run's index from this one: a new file (whose inode number may be
        # the old one's, freed a moment ago), shorter than what was read, or another first
        # record (its arrival time).
        self.identity: Optional[Tuple[int, int]] = None
        self.head = b""

    def read_new(self) -> Tuple[bool, Dict[int, List[Record]]]:
        """``(replaced, records by file id)``: the records added since the last call.

        ``replaced`` says the index is another file than last time, or shorter: a new run
        reuses the directory, and what was read before belongs to the old one. Its records are
        then read from the start.
        """
        try:
            # Non-blocking, and regular files only: a FIFO in the index's place must not hang.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with open(fd, "rb") as handle:
                stat = os.fstat(fd)
                if not S_ISREG(stat.st_mode):
                    return False, {}
                head = handle.read(RECORD.size)
                replaced = self.position > 0 and (
                    (stat.st_dev, stat.st_ino) != self.identity
                    or stat.st_size < self.position
                    or head != self.head
                )
                if replaced or self.position == 0:
                    self.identity, self.head = (stat.st_dev, stat.st_ino), head
                    self.position = 0
                return replaced, self._read(handle)
        except OSError:
            return False, {}  # no index (an older run, or not created yet): file order

    def _read(self, handle: BinaryIO) -> Dict[int, List[Record]]:
        found: Dict[int, List[Record]] = {}
        handle.seek(self.position)
        while True:
            data = handle.read(READ_SIZE)
            usable = len(data) - len(data) % RECORD.size
            for file_id, offset, arrived in RECORD.iter_unpack(data[:usable]):
                found.setdefault(file_id, []).append((offset, arrived))
            self.position += usable
            if len(data) < READ_SIZE:  # READ_SIZE holds whole records: a full read used all
                return found
