"""Every rank log under the directories given, merged in arrival order, poll after poll.

Each poll looks at the manifests again (a restart's new attempt, a new file), takes each log's
size, *then* reads the index: the launcher writes a chunk's record before the chunk, so every
byte up to those sizes has its record. What is new in each log is cut into blocks
(:mod:`malaunch.logs.reader`) and the logs' blocks are merged with ``heapq.merge``. A poll
merges what it found; when following, a line found by a later poll is printed after it even
if its arrival time is a little earlier.
"""

from __future__ import annotations

import heapq
import os
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple

from malaunch.logs.discover import Discovery, RankLog, load_manifest, rank_logs
from malaunch.logs.index import IndexTail, Record
from malaunch.logs.reader import Block, LogReader, block_key
from malaunch.logs.select import Selection
from malaunch.supervisor.runs import INDEX, MANIFEST

DISCOVER_INTERVAL = 1.0  # seconds between looks for new node directories when following


class NodeLogs:
    """One node launcher's log directory: its manifest, its index, a reader per rank log."""

    def __init__(self, directory: Path, selection: Selection) -> None:
        self.dir = directory
        self.selection = selection
        self.index = IndexTail(directory / INDEX)
        self.stamp: Optional[Tuple[int, int, int]] = None  # the manifest last read
        self.readers: Dict[int, LogReader] = {}  # by file id
        self.skipped: Set[int] = set()  # file ids the filters leave out
        self.pending: Dict[int, List[Record]] = {}  # records of files the manifest lacks yet

    def refresh(self) -> None:
        """Read the manifest again if it changed: new files, new attempts' processes."""
        try:
            stat = os.stat(self.dir / MANIFEST)
        except OSError:
            return
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        manifest = load_manifest(self.dir) if stamp != self.stamp else None
        if manifest is None:
            return
        self.stamp = stamp
        for log in rank_logs(self.dir, manifest):
            self._add(log)

    def _add(self, log: RankLog) -> None:
        reader = self.readers.get(log.file_id)
        if reader is not None:
            reader.log = log  # named after the process of the latest attempt
        elif log.file_id not in self.skipped and not self.selection.wants(log):
            self.skipped.add(log.file_id)
            self.pending.pop(log.file_id, None)
        elif log.file_id not in self.skipped:
            reader = LogReader(log, (log.node, str(self.dir), log.file_id))
            reader.add_records(self.pending.pop(log.file_id, []))
            self.readers[log.file_id] = reader

    def streams(self, final: bool) -> List[Iterator[Block]]:
        """Each log's new blocks, up to the size it had before the index was read."""
        self.refresh()
        sizes = [(reader, reader.size()) for reader in self.readers.values()]
        replaced, records = self.index.read_new()
        if replaced:  # a new run in this directory: start over with it
            self.close()
            self.readers, self.skipped, self.pending, self.stamp = {}, set(), {}, None
            sizes = []
        for file_id, found in records.items():
            reader = self.readers.get(file_id)
            if reader is not None:
                reader.add_records(found)
            elif file_id not in self.skipped:
                self.pending.setdefault(file_id, []).extend(found)
        return [reader.blocks(size, final) for reader, size in sizes]

    def close(self) -> None:
        for reader in self.readers.values():
            reader.close()


class LogSet:
    """The node directories under the roots, including those that appear while following."""

    def __init__(
        self,
        roots: List[Path],
        selection: Selection,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.discovery = Discovery(roots)
        self.selection = selection
        self.clock = clock
        self.nodes: Dict[Path, NodeLogs] = {}
        self.next_discovery = -1.0

    def poll(self, final: bool) -> Iterator[Block]:
        """The blocks that are new since the last poll, in arrival order."""
        now = self.clock()
        if now >= self.next_discovery:
            self.next_discovery = now + DISCOVER_INTERVAL
            for directory in self.discovery.node_dirs():
                if directory not in self.nodes:
                    self.nodes[directory] = NodeLogs(directory, self.selection)
        streams = [stream for node in self.nodes.values() for stream in node.streams(final)]
        return heapq.merge(*streams, key=block_key)

    def texts(self, final: bool) -> Iterator[str]:
        """What the new blocks print as, filtered and prefixed (empty blocks left out)."""
        render = self.selection.render
        for block in self.poll(final):
            text = render(block)
            if text:
                yield text

    def close(self) -> None:
        for node in self.nodes.values():
            node.close()
