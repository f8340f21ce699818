"""What a report shows, collected from a run's log dir: plain frozen records, no I/O.

Times are seconds since the epoch. A *bar* is one process in one attempt; a *row* is one
process of the plan (a rank, a ps task, a service) across the attempts of its node.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

# How a process ended, which is also the bar's colour in the timeline.
OK = "ok"  # exit 0 (or a service stopped when the job had succeeded)
FAILED = "failed"  # the failure that stopped the attempt, or a failure nobody else caused
STOPPED = "stopped"  # ended because the job stopped it after a failure elsewhere
HUNG = "hung"  # the rank found silent past --hang-timeout
UNKNOWN = "unknown"  # no summary says how it ended (a killed launcher, a run still going)
OUTCOMES = (OK, FAILED, STOPPED, HUNG, UNKNOWN)


@dataclass(frozen=True)
class LogFile:
    """A file the run wrote: the path it recorded, and where it is now (None: missing)."""

    recorded: str
    path: Optional[Path]
    label: str = ""


@dataclass(frozen=True)
class Bar:
    """One process (or node launcher) in one attempt, as a span of wall-clock time."""

    attempt: int
    start: float
    end: float
    outcome: str
    ending: str  # "exit 0", "exit 1", "SIGTERM", "stopped", "unknown"
    exact: bool  # both times as recorded; else the end is estimated (see bars.py)
    pid: Optional[int] = None
    last_output: Optional[float] = None
    culprit: bool = False  # named an odd one out when the job hung


@dataclass(frozen=True)
class Row:
    """One process of a node's plan, with a bar per attempt it ran in."""

    node: Optional[int]
    role: str
    rank: Optional[int]
    local_rank: Optional[int]
    log: LogFile
    bars: Tuple[Bar, ...]

    @property
    def label(self) -> str:
        name = "rank" if self.role == "worker" else self.role
        number = self.rank if self.rank is not None else self.local_rank
        return name if number is None else f"{name} {number}"

    @property
    def culprit(self) -> bool:
        return any(bar.culprit for bar in self.bars)


@dataclass(frozen=True)
class Phase:
    """A data-staging phase of a node (the summary's ``staging`` key, when there is one)."""

    name: str
    start: float
    end: float
    detail: str


@dataclass(frozen=True)
class Failure:
    """The failure that ended one attempt (a job's attempts each have at most one)."""

    attempt: int
    node: Optional[int]
    kind: str  # exit, signal, hang, lost, launch, absent
    role: Optional[str]
    rank: Optional[int]
    code: Optional[int]
    signal: Optional[str]
    log: Optional[LogFile]
    tail: Tuple[str, ...]
    exception: Optional[str]
    decision: Optional[str]
    hang: Optional[Dict[str, Any]] = None
    error: Optional[Dict[str, str]] = None  # the structured error of its error file (@record)


@dataclass(frozen=True)
class Loss:
    """A node lost in an attempt, and when its replacement joined (None: it never did)."""

    attempt: int
    node: int
    lost_at: float
    rejoined_at: Optional[float]


@dataclass(frozen=True)
class NodeReport:
    """One node launcher's run: its processes, its own life, its files."""

    index: int
    host: str
    directory: Path
    exit_code: Optional[int]
    stopped_by: Optional[Dict[str, Any]]
    launcher: Optional[Bar]
    rows: Tuple[Row, ...]
    attempt_starts: Tuple[float, ...]
    phases: Tuple[Phase, ...] = ()
    logs: Tuple[LogFile, ...] = ()


@dataclass(frozen=True)
class JobReport:
    """Everything the page shows."""

    directory: Path
    simulated: bool
    topology: Dict[str, Any]
    source: str
    framework: Optional[str]
    job_id: Optional[str]
    exit_code: Optional[int]
    nodes: Tuple[NodeReport, ...]
    failures: Tuple[Failure, ...] = ()
    hang: Optional[Dict[str, Any]] = None
    attempts: Tuple[Dict[str, Any], ...] = ()
    platform_rows: Tuple[Row, ...] = ()  # simulate's own processes besides the nodes
    losses: Tuple[Loss, ...] = ()  # lost nodes and their replacements, in time order
    logs: Tuple[LogFile, ...] = ()  # the simulation parent's own files

    @property
    def rows(self) -> Tuple[Row, ...]:
        return tuple(row for node in self.nodes for row in node.rows)
