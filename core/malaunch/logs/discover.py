"""Which rank logs a directory holds: node directories, their manifests, their files.

A node launcher's run folder holds its manifest (``malaunch-run.json``, see
:mod:`malaunch.supervisor.runlog`). The directories given to ``malaunch logs`` may be a log dir
(read through its current run, :func:`malaunch.supervisor.runs.current_run`, looked up again
at every search so that following moves on to a new run), a run folder, a ``malaunch simulate``
run (its ``node-<k>/`` subdirectories are the node launchers' own), or a folder of node log
dirs collected from a cluster's shared storage; they are searched two levels deep, a log dir
standing for its current run at each level. The simulate parent's own manifest lists the node
launchers' console output (``node-<k>.log``), which is not a rank log and is left out.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from malaunch.errors import MissingInputError
from malaunch.log import logger
from malaunch.supervisor import runlog
from malaunch.supervisor.runs import MANIFEST, current_run

MAX_DEPTH = 2  # a folder of simulate directories: folder / simulate dir / node-<k>


@dataclasses.dataclass(frozen=True)
class RankLog:
    """One log file of a node launcher's run and the process that writes it."""

    node: int
    file_id: int
    path: Path
    role: str
    rank: Optional[int]
    local_rank: Optional[int]

    @property
    def label(self) -> str:
        """``node 0 rank 3``, ``node 1 ps 0``, ``node 0 scheduler``: the launcher's names."""
        if self.rank is not None:
            name = f"{'rank' if self.role == 'worker' else self.role} {self.rank}"
        elif self.local_rank is not None:
            name = f"{self.role} {self.local_rank}"
        else:
            name = self.role
        return f"node {self.node} {name}"


def load_manifest(directory: Path) -> Optional[Dict[str, Any]]:
    """The manifest in ``directory``, or None (missing, being replaced, not a regular file, or
    not a JSON object)."""
    try:
        return runlog.load_json_object(directory / MANIFEST)
    except (OSError, ValueError):
        return None


def is_simulate_parent(manifest: Dict[str, Any]) -> bool:
    """Whether this is the manifest of ``malaunch simulate`` itself (its topology source is
    ``simulate-<platform>``); its processes are node launchers, not ranks."""
    topology = manifest.get("topology")
    source = topology.get("source") if isinstance(topology, dict) else None
    return isinstance(source, str) and source.startswith("simulate-")


class Discovery:
    """Finds node directories under the directories given; remembers what it has classified,
    so that following a run costs a directory listing, not a manifest parse, per look."""

    def __init__(self, roots: List[Path]) -> None:
        self.roots = roots
        self.kinds: Dict[Path, bool] = {}  # directory -> is a node directory
        self.runs: Dict[Path, Path] = {}  # a root given -> the run it was last read through

    def node_dirs(self) -> List[Path]:
        """Every node directory at or under the roots, each once, in the order found."""
        found: List[Path] = []
        seen = set()
        for root in self.roots:
            self._say_run(root)
            for path in self.under(root):
                if path.resolve() not in seen:  # a directory given twice, or also as a parent
                    seen.add(path.resolve())
                    found.append(path)
        return found

    def under(self, root: Path) -> List[Path]:
        """The node directories at or under one root, in name order."""
        found: List[Path] = []
        self._scan(root, 0, found)
        return found

    def _say_run(self, root: Path) -> None:
        """One line on stderr naming the run a log dir given is read through, and another
        each time a newer run takes its place (when following)."""
        run = current_run(root)
        if run is None or self.runs.get(root) == run:
            return
        what = "following the new" if root in self.runs else "reading the"
        logger.info(f"{what} latest run in {root}: {run.name}")
        self.runs[root] = run

    def _scan(self, directory: Path, depth: int, found: List[Path]) -> None:
        directory = current_run(directory) or directory
        if self._is_node_dir(directory):
            found.append(directory)
            return
        if depth >= MAX_DEPTH:
            return
        try:
            children = sorted(entry.path for entry in os.scandir(directory) if entry.is_dir())
        except OSError:
            return
        for child in children:
            self._scan(Path(child), depth + 1, found)

    def _is_node_dir(self, directory: Path) -> bool:
        known = self.kinds.get(directory)
        if known is not None:
            return known
        if not (directory / MANIFEST).is_file():
            return False
        manifest = load_manifest(directory)
        if manifest is None:
            return False  # being written: classified at the next look
        self.kinds[directory] = not is_simulate_parent(manifest)
        return self.kinds[directory]


def require_runs(roots: List[Path]) -> None:
    """MissingInputError naming the first root with no manifest in it or under it.

    A simulate directory whose node launchers have not written theirs yet passes: following
    it shows their logs once they do.
    """
    for root in roots:
        problem = missing_run(root)
        if problem is not None:
            raise MissingInputError(f"{root}: {problem}")


def missing_run(root: Path) -> Optional[str]:
    """Why ``root`` holds no run yet, or None when it has a manifest in it or under it."""
    if not root.is_dir():
        return "not a directory" if root.exists() else "no such log directory"
    if not _any_manifest(root, 0):
        return f"no {MANIFEST} here or in its subdirectories (not a malaunch log dir)"
    return None


def _any_manifest(directory: Path, depth: int) -> bool:
    directory = current_run(directory) or directory
    if (directory / MANIFEST).is_file():
        return True
    if depth >= MAX_DEPTH:
        return False
    try:
        children = [Path(entry.path) for entry in os.scandir(directory) if entry.is_dir()]
    except OSError:
        return False
    return any(_any_manifest(child, depth + 1) for child in children)


def rank_logs(directory: Path, manifest: Dict[str, Any]) -> List[RankLog]:
    """The log files a node manifest lists, each with the process of its latest attempt."""
    node = _int_or_none(manifest.get("node"))
    files = manifest.get("files")
    if not isinstance(files, list):
        return []
    latest = _latest_processes(manifest.get("attempts"))
    logs = []
    for file_id, name in enumerate(files):
        process = latest.get(file_id)
        if not isinstance(name, str) or process is None:
            continue
        role = process.get("role")
        logs.append(
            RankLog(
                node=node or 0,
                file_id=file_id,
                path=_local_path(directory, name),
                role=role if isinstance(role, str) and role else "process",
                rank=_int_or_none(process.get("rank")),
                local_rank=_int_or_none(process.get("local_rank")),
            )
        )
    return logs


def _latest_processes(attempts: Any) -> Dict[int, Dict[str, Any]]:
    """File id -> the process entry of the last attempt that wrote that file."""
    latest: Dict[int, Dict[str, Any]] = {}
    for attempt in attempts if isinstance(attempts, list) else []:
        processes = attempt.get("processes") if isinstance(attempt, dict) else None
        for process in processes if isinstance(processes, list) else []:
            file_id = _int_or_none(process.get("file")) if isinstance(process, dict) else None
            if file_id is not None:
                latest[file_id] = process
    return latest


def _local_path(directory: Path, listed: str) -> Path:
    """Where a listed log file is now: beside the manifest (the directory may have been copied
    or mounted elsewhere since), else where the manifest says."""
    beside = directory / Path(listed).name
    if beside.exists() or not Path(listed).exists():
        return beside
    return Path(listed)


def _int_or_none(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
