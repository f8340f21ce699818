"""One log file cut into blocks: whole lines that share an arrival time.

A line takes the arrival time of the index record of the chunk it starts in (the record with
the largest offset at or before the line's first byte), so the lines between two records' line
starts form one block. Merging blocks by ``(time, file order, block number)`` gives exactly the
order of merging lines by ``(time, file order, line number)``, at the cost of a few string
operations per 64 KiB chunk instead of a Python loop per line.

Files are read as bytes, cut at ``b"\\n"`` and decoded as UTF-8 with ``errors="replace"``. An
unfinished last line is held back until its newline comes (when following) or printed as it
stands (when reading once). A line longer than :data:`READ_SIZE` is cut there, as the
launcher's console relay cuts one.
"""

from __future__ import annotations

import contextlib
import os
from stat import S_ISREG
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple

from malaunch.log import logger
from malaunch.logs.discover import RankLog
from malaunch.logs.index import Record

READ_SIZE = 1 << 20
INF = float("inf")
TRIM_AT = 4096  # applied records kept before the list is trimmed

Order = Tuple[int, str, int]  # (node, node directory, file id): how ties are broken


class Block(NamedTuple):
    """Whole lines of one log that start in the same indexed chunk."""

    time: Optional[float]  # arrival time; None when the index has no record for them
    order: Order
    seq: int
    log: RankLog
    text: str  # one or more lines, each ending in "\n"


def block_key(block: Block) -> Tuple[float, Order, int]:
    """Arrival time, then file order, then position in the file; unindexed lines go last."""
    return (INF if block.time is None else block.time, block.order, block.seq)


class LogReader:
    """Reads one rank log from where it stopped, with the index records that apply to it."""

    def __init__(self, log: RankLog, order: Order) -> None:
        self.log = log
        self.order = order
        self.fd = -1
        self.identity: Optional[Tuple[int, int]] = None
        self.position = 0  # the first byte not yet returned: always the start of a line
        self.time: Optional[float] = None  # the arrival time of the line at ``position``
        self.records: List[Record] = []  # offsets past ``position``, in order, from ``applied``
        self.applied = 0
        self.seq = 0
        self.warned = False  # about a log that is not a regular file

    def add_records(self, records: Sequence[Record]) -> None:
        self.records.extend(records)

    def size(self) -> int:
        """The file's size now (0 while it does not exist); a file replaced under the same name
        or truncated is read again from its start.

        Only a regular file is read: a FIFO or device in a log's place (the directory may be a
        copy, or hostile) would block or never end. It is skipped with one warning.
        """
        try:
            stat = os.stat(self.log.path)
        except OSError:
            return 0
        identity = (stat.st_dev, stat.st_ino)
        if identity != self.identity:
            self.close()
            if not self._regular(stat.st_mode):
                return 0
            try:  # non-blocking: it may have been replaced by a FIFO since the stat
                self.fd = os.open(self.log.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                return 0
            stat = os.fstat(self.fd)  # the file opened, should it have been replaced again
            if not self._regular(stat.st_mode):
                self.close()
                return 0
            self.identity = (stat.st_dev, stat.st_ino)
            self.position = 0
        elif stat.st_size < self.position:
            self.position = 0
        return stat.st_size

    def _regular(self, mode: int) -> bool:
        if S_ISREG(mode):
            return True
        if not self.warned:
            self.warned = True
            logger.warning(f"{self.log.path}: not a regular file; its lines are left out")
        return False

    def blocks(self, limit: int, final: bool) -> Iterator[Block]:
        """The blocks of the whole lines between ``position`` and byte ``limit``.

        ``final``: the end is the end of the log (reading once), so an unfinished last line is
        a line; otherwise it waits for the next call.
        """
        while self.fd >= 0 and self.position < limit:
            data = os.pread(self.fd, min(READ_SIZE, limit - self.position), self.position)
            end = data.rfind(b"\n") + 1
            consumed = len(data)
            if end == len(data) and data:
                region = data  # whole lines only: the common case
            elif end == 0 and len(data) >= READ_SIZE:  # an overlong line: cut it
                region = data + b"\n"
                if os.pread(self.fd, 1, self.position + len(data)) == b"\n":
                    consumed += 1  # it ends right there: no empty line after the cut
            elif final and data and self.position + len(data) >= limit:
                region = data + b"\n"  # the log's unfinished last line
            elif end:
                region, consumed = data[:end], end
            else:
                break  # nothing new, or a line still being written
            yield from self._split(region)
            self.position += consumed
        self._trim()

    def _split(self, region: bytes) -> Iterator[Block]:
        """``region`` (whole lines, from ``position``) in blocks, one per record's line start."""
        base, start, time = self.position, 0, self.time
        records, index = self.records, self.applied
        if time is None and index < len(records):
            time = records[index][1]  # lines before the first record: that record's time
        while index < len(records) and records[index][0] < base + len(region):
            offset, arrived = records[index]
            index += 1
            relative = offset - base
            # The first line that starts at or after the record's offset.
            cut = relative if relative <= 0 or region[relative - 1] == 10 else (
                region.find(b"\n", relative) + 1
            )  # fmt: skip
            if cut > start:
                yield self._block(time, region[start:cut])
                start = cut
            time = arrived if time is None else max(time, arrived)  # never back in time
        self.applied, self.time = index, time
        if start < len(region):
            yield self._block(time, region[start:])

    def _block(self, time: Optional[float], data: bytes) -> Block:
        self.seq += 1
        text = data.decode("utf-8", errors="replace")
        return Block(time, self.order, self.seq, self.log, text)

    def _trim(self) -> None:
        if self.applied >= TRIM_AT:
            del self.records[: self.applied]
            self.applied = 0

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
