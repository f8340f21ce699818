"""What a run leaves in its log directory for ``malaunch logs`` and ``malaunch report``.

``malaunch-run.json`` (the *manifest*, rewritten atomically at each attempt's start)::

    {"version": 1, "node": int, "host": str, "framework": str, "job_id": str | null,
     "started": ISO time, "topology": {...the Topology...},
     "files": [log file path, ...],          # index = file id in malaunch-index.bin
     "attempts": [{"attempt": int, "started": ISO time,
                   "processes": [{"file": id, "role", "rank", "local_rank", "log_file",
                                  "service", "pid"}]}]}

``malaunch-index.bin`` (the *line index*): one 20-byte record per chunk of output the launcher
copied into a log file, ``struct.pack("<IQd", file_id, offset, arrival_time)``: the chunk
starting at byte ``offset`` of file ``file_id`` arrived at ``arrival_time`` (seconds since the
epoch). Lines take the arrival time of the chunk they start in, so merging many ranks' logs in
time order never depends on timestamps the programs printed. One record per 64 KiB read at
most: 800,000 lines cost a few thousand records.

Both live in the launch's run folder (:mod:`malaunch.supervisor.runs`), which holds nothing
of an earlier run: nothing here ever removes a file. The manifest's first writing (attempt
0's start) is the moment the run counts as started (:attr:`RunLog.on_first_attempt`).
"""

from __future__ import annotations

import datetime
import json
import os
import struct
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from malaunch.files import read_regular, write_atomic
from malaunch.jsontext import loads
from malaunch.log import logger
from malaunch.models import LaunchPlan
from malaunch.supervisor.runs import INDEX, MANIFEST
from malaunch.supervisor.spawn import Child

RECORD = struct.Struct("<IQd")
# A manifest lists the topology and every log file: 200,000 ranks write about 60 MB.
MAX_MANIFEST_BYTES = 256 << 20


def iso(timestamp: float) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.astimezone().isoformat(timespec="milliseconds")


class RunLog:
    """Writes the manifest and the line index of this launcher's run."""

    def __init__(
        self,
        log_dir: str,
        plan: LaunchPlan,
        started: float,
        on_first_attempt: Optional[Callable[[], None]] = None,
    ) -> None:
        self.dir = Path(log_dir)
        self.on_first_attempt = on_first_attempt
        self.files: List[str] = []
        self.attempts: List[Dict[str, Any]] = []
        topology = plan.topology
        self.head: Dict[str, Any] = {
            "version": 1,
            "node": topology.node_rank,
            "host": topology.this_node.host,
            "framework": plan.framework,
            "job_id": topology.job_id,
            "started": iso(started),
            "topology": topology.model_dump(mode="json"),
        }
        self.index_fd = -1
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC
            self.index_fd = os.open(self.dir / INDEX, flags, 0o644)
        except OSError as exc:
            logger.warning(f"cannot write the line index in {self.dir}: {exc}")

    def attempt_started(self, number: int, children: Sequence[Child], started: float) -> None:
        """Record an attempt's processes (and give each child its file id)."""
        processes = []
        for child in children:
            if child.spec.log_file not in self.files:
                self.files.append(child.spec.log_file)
            child.file_id = self.files.index(child.spec.log_file)
            spec = child.spec
            processes.append(
                {
                    "file": child.file_id,
                    "role": spec.role,
                    "rank": spec.rank,
                    "local_rank": spec.local_rank,
                    "log_file": spec.log_file,
                    "service": spec.service,
                    "pid": child.pid,
                }
            )
        self.attempts.append({"attempt": number, "started": iso(started), "processes": processes})
        document = {**self.head, "files": self.files, "attempts": self.attempts}
        try:
            write_atomic(self.dir / MANIFEST, json.dumps(document, indent=1) + "\n")
        except OSError as exc:
            logger.warning(f"cannot write {self.dir / MANIFEST}: {exc}")
        if self.on_first_attempt is not None:
            hook, self.on_first_attempt = self.on_first_attempt, None
            hook()

    def chunk(self, child: Child, offset: int, arrived: float) -> None:
        """A chunk of ``child``'s output is about to be written at ``offset`` of its log."""
        if self.index_fd < 0 or child.file_id < 0:
            return
        try:
            os.write(self.index_fd, RECORD.pack(child.file_id, offset, arrived))
        except OSError as exc:  # a full disk: the index goes, the job and its logs go on
            logger.warning(f"cannot write the line index: {exc}")
            self.close()

    def close(self) -> None:
        if self.index_fd >= 0:
            os.close(self.index_fd)
            self.index_fd = -1


def load_json_object(path: Path) -> Dict[str, Any]:
    """The JSON object in a run's file (its manifest, its summary): a regular file of at most
    :data:`MAX_MANIFEST_BYTES`, read without blocking (a FIFO in its place would hang the
    reader). Also what ``malaunch logs`` and ``malaunch report`` read a run with.

    :raises OSError: missing or unreadable; :class:`NotAFile`, :class:`TooLarge` as
        :func:`read_regular`.
    :raises ValueError: not a JSON object (bad syntax, not UTF-8, nested too deeply, an integer
        past Python's conversion limit), said in a few words.
    """
    raw = read_regular(path, MAX_MANIFEST_BYTES)
    try:
        loaded = loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except ValueError as exc:  # bad syntax, or past a limit: jsontext says which
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"not a JSON object (a {type(loaded).__name__})")
    return loaded
