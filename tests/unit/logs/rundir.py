"""A synthetic node log directory: a manifest, log files and index records, written by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from malaunch.supervisor.runlog import RECORD
from malaunch.supervisor.runs import INDEX, MANIFEST

Process = Tuple[str, Optional[int], Optional[int]]  # role, rank, local_rank


class NodeDir:
    """One node launcher's log directory, written the way the supervisor writes it."""

    def __init__(self, path: Path, node: int = 0, source: str = "local") -> None:
        self.path = path
        self.node = node
        self.source = source
        self.started = "2026-01-01T00:00:00.000+00:00"
        self.files: List[str] = []
        self.attempts: List[Dict[str, Any]] = []
        self.sizes: Dict[int, int] = {}
        path.mkdir(parents=True, exist_ok=True)

    def attempt(self, *processes: Process) -> NodeDir:
        """Record an attempt whose processes write files named after their role and rank."""
        entries = []
        for role, rank, local_rank in processes:
            name = str(self.path / f"{role}-{rank if rank is not None else local_rank}.log")
            if name not in self.files:
                self.files.append(name)
            entries.append(
                {"file": self.files.index(name), "role": role, "rank": rank,
                 "local_rank": local_rank, "log_file": name, "service": False, "pid": 1}
            )  # fmt: skip
        self.attempts.append({"attempt": len(self.attempts), "processes": entries})
        self.write_manifest()
        return self

    def write_manifest(self) -> None:
        document = {
            "version": 1, "node": self.node, "host": "127.0.0.1", "framework": "torch_ddp",
            "job_id": "job", "started": self.started, "topology": {"source": self.source},
            "files": self.files, "attempts": self.attempts,
        }  # fmt: skip
        (self.path / MANIFEST).write_text(json.dumps(document), encoding="utf-8")

    def chunk(self, file_id: int, data: bytes, arrived: float, indexed: bool = True) -> None:
        """The launcher copied ``data`` into a log at ``arrived``: record first, then data."""
        offset = self.sizes.get(file_id, 0)
        if indexed:
            with open(self.path / INDEX, "ab") as index:
                index.write(RECORD.pack(file_id, offset, arrived))
        with open(self.files[file_id], "ab") as log:
            log.write(data)
        self.sizes[file_id] = offset + len(data)


MakeNode = Callable[..., NodeDir]  # the make_node fixture: (name, node=0, source)
