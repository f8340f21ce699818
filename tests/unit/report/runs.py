"""Log dirs as launchers leave them, written from plain dicts (the shapes of runlog.py and
summary.py), so the report's tests need no real run. The e2e tests use real ones."""

from __future__ import annotations

import datetime
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

T0 = 1_800_000_000.0
RECORD = struct.Struct("<IQd")


def iso(at: float) -> str:
    moment = datetime.datetime.fromtimestamp(at, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds")


def exit_failure(node: int, rank: int, code: int, log: str, tail: Sequence[str]) -> Dict[str, Any]:
    exception = "\n".join(tail[1:]) if tail and tail[0].startswith("Traceback") else None
    return {
        "kind": "exit",
        "node": node,
        "rank": rank,
        "role": "worker",
        "code": code,
        "signal": None,
        "log_file": log,
        "tail": list(tail),
        "exception": exception,
    }


@dataclass
class Launcher:
    """One node launcher's run: ranks, attempt start times, and how the last attempt ended."""

    directory: Path
    node: int = 0
    ranks: Tuple[int, ...] = (0, 1)
    starts: Tuple[float, ...] = (T0,)
    lasted: float = 2.0  # of every process in the last attempt
    endings: Dict[int, Tuple[Optional[int], Optional[str]]] = field(default_factory=dict)
    failures: Dict[int, Dict[str, Any]] = field(default_factory=dict)  # attempt -> failure
    exit_code: int = 0
    hosts: Tuple[str, ...] = ("127.0.0.1",)
    extra: Dict[str, Any] = field(default_factory=dict)  # more summary keys (hang, staging)
    lines: Dict[int, List[Tuple[float, str]]] = field(default_factory=dict)  # rank -> output

    def log(self, rank: int) -> str:
        return str(self.directory / f"worker-{rank}.log")

    def pid(self, attempt: int, rank: int) -> int:
        return 1000 + 100 * attempt + rank

    def write(self, *, manifest: bool = True, summary: bool = True) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        for rank in self.ranks:
            text = "".join(line + "\n" for _, line in self.lines.get(rank, []))
            Path(self.log(rank)).write_text(text or f"rank {rank}\n", encoding="utf-8")
        if manifest:
            self._write("malaunch-run.json", self.manifest())
            self._write_index()
        if summary:
            self._write("malaunch-summary.json", self.summary())
        return self.directory

    def _write(self, name: str, document: Dict[str, Any]) -> None:
        (self.directory / name).write_text(json.dumps(document, indent=1), encoding="utf-8")

    def _write_index(self) -> None:
        records = []
        for file_id, rank in enumerate(self.ranks):
            offset = 0
            for at, line in self.lines.get(rank, []):
                records.append(RECORD.pack(file_id, offset, at))
                offset += len(line.encode()) + 1
        (self.directory / "malaunch-index.bin").write_bytes(b"".join(records))

    def topology(self) -> Dict[str, Any]:
        per_node = len(self.ranks)
        nodes = [
            {
                "index": index,
                "host": host,
                "name": None,
                "role": None,
                "devices": [
                    {"rank": index * per_node + i, "local_index": i, "device_id": i}
                    for i in range(per_node)
                ],
            }
            for index, host in enumerate(self.hosts)
        ]
        return {
            "source": "volcano",
            "nodes": nodes,
            "node_rank": self.node,
            "master_addr": self.hosts[0],
            "master_port": 29500,
            "job_id": "job-1",
        }

    def process(self, attempt: int, rank: int) -> Dict[str, Any]:
        return {
            "file": self.ranks.index(rank),
            "role": "worker",
            "rank": rank,
            "local_rank": self.ranks.index(rank),
            "log_file": self.log(rank),
            "service": False,
            "pid": self.pid(attempt, rank),
        }

    def manifest(self) -> Dict[str, Any]:
        attempts = [
            {
                "attempt": number,
                "started": iso(start),
                "processes": [self.process(number, rank) for rank in self.ranks],
            }
            for number, start in enumerate(self.starts)
        ]
        return {
            "version": 1,
            "node": self.node,
            "host": self.hosts[self.node],
            "framework": "torch_ddp",
            "job_id": "job-1",
            "started": iso(self.starts[0] - 0.5),
            "topology": self.topology(),
            "files": [self.log(rank) for rank in self.ranks],
            "attempts": attempts,
        }

    def summary(self) -> Dict[str, Any]:
        last = len(self.starts) - 1
        processes = []
        for rank in self.ranks:
            code, signal = self.endings.get(rank, (0, None))
            processes.append(
                {
                    **self.process(last, rank),
                    "exit_code": code,
                    "signal": signal,
                    "start_time": iso(self.starts[-1]),
                    "end_time": iso(self.starts[-1] + self.lasted),
                }
            )
        attempts = [
            {
                "attempt": number,
                "exit_code": self.exit_code if number == last else 1,
                "failure": self.failures.get(number),
                "decision": "restart 1 of 1" if number < last else "done",
                "delay": None,
            }
            for number in range(len(self.starts))
        ]
        return {
            "exit_code": self.exit_code,
            "node": self.node,
            "first_failure": None,
            "stopped_by": None,
            "job_failure": self.failures.get(last),
            "hang": None,
            "restarts": last,
            "attempts": attempts,
            "processes": [{k: v for k, v in p.items() if k != "file"} for p in processes],
            **self.extra,
        }


def simulation(root: Path, launchers: Sequence[Launcher], lasted: float = 4.0) -> Path:
    """A simulation's dir: the parent's manifest and summary (the node launchers as its
    processes, their output in node-<k>.log) around the launchers' node-<k>/ dirs."""
    root.mkdir(parents=True, exist_ok=True)
    processes = []
    for launcher in launchers:
        launcher.write()
        log = root / f"node-{launcher.node}.log"
        log.write_text(f"[rank 0] hello from node {launcher.node}\n", encoding="utf-8")
        processes.append(
            {
                "role": "node",
                "rank": launcher.node,
                "local_rank": None,
                "pid": 10 + launcher.node,
                "exit_code": launcher.exit_code,
                "signal": None,
                "start_time": iso(T0 - 1),
                "end_time": iso(T0 - 1 + lasted),
                "log_file": str(log),
                "service": False,
            }
        )
    topology = {"source": "simulate-volcano", "nodes": [], "job_id": "ma-job-7"}
    manifest = {
        "version": 1,
        "node": 0,
        "host": "127.0.0.1",
        "framework": "torch_ddp",
        "job_id": "ma-job-7",
        "started": iso(T0 - 1),
        "topology": topology,
        "files": [p["log_file"] for p in processes],
        "attempts": [{"attempt": 0, "started": iso(T0 - 1), "processes": processes}],
    }
    summary = {"exit_code": 0, "node": 0, "restarts": 0, "attempts": [], "processes": processes}
    (root / "malaunch-run.json").write_text(json.dumps(manifest), encoding="utf-8")
    (root / "malaunch-summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return root


HOSTILE = "<script>alert(1)</script>"
HOSTS = ("127.0.0.1", "127.0.0.2")


def restarted_job(root: Path) -> Path:
    """A simulated 2 x 2 job whose rank 3 raised in attempt 0; attempt 1 succeeded."""
    log = str(root / "node-1" / "worker-3.log")
    tail = [
        "Traceback (most recent call last):",
        '  File "train.py", line 6, in <module>',
        f"ValueError: rank 3 broke {HOSTILE}",
    ]
    failure = exit_failure(1, 3, 1, log, tail)
    launchers = [
        Launcher(root / f"node-{node}", node=node, ranks=ranks, starts=(T0, T0 + 5),
                 failures={0: failure}, hosts=HOSTS)
        for node, ranks in ((0, (0, 1)), (1, (2, 3)))
    ]  # fmt: skip
    launchers[1].lines = {3: [(T0 + 1.0, f"rank 3 says {HOSTILE}"), *((T0 + 1.1, t) for t in tail)]}
    return simulation(root, launchers)
