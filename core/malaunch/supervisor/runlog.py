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

A launcher starting in a log directory first removes the files its previous run there listed
(log files, index, manifest and summary), so that a reused ``--log-dir`` holds one run. When
that run was a ``malaunch simulate``, its node launchers' runs in ``node-<k>/`` are cleared the
same way (and their folders removed once empty): ``malaunch logs`` and ``report`` would
otherwise read them as part of the new run.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any, Dict, List, Sequence

from malaunch.files import read_regular, write_atomic
from malaunch.jsontext import loads
from malaunch.log import logger
from malaunch.models import LaunchPlan
from malaunch.supervisor.spawn import Child

MANIFEST = "malaunch-run.json"
INDEX = "malaunch-index.bin"
SUMMARY = "malaunch-summary.json"
RECORD = struct.Struct("<IQd")
# A manifest lists the topology and every log file: 200,000 ranks write about 60 MB.
MAX_MANIFEST_BYTES = 256 << 20


def iso(timestamp: float) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.astimezone().isoformat(timespec="milliseconds")


def clear_previous_run(log_dir: Path) -> None:
    """Remove what the run that last used ``log_dir`` listed: never anything else.

    A manifest that cannot be read (a FIFO or device in its place, too large, not JSON, nested
    too deeply) means no previous run to clear, with a warning: it is the launcher's own file,
    which this run replaces.
    """
    manifest = log_dir / MANIFEST
    try:
        previous = load_json_object(manifest)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        logger.warning(f"{manifest}: {_why(exc)}; no previous run to clear")
        return
    try:
        files = [Path(f) for f in previous.get("files", []) if isinstance(f, str)]
        source = str(previous.get("topology", {}).get("source", ""))
    except (TypeError, AttributeError):  # "files" not a list, "topology" not an object
        return
    root = log_dir.resolve()
    for path in [*files, log_dir / INDEX, log_dir / SUMMARY, manifest]:
        with contextlib.suppress(OSError, ValueError):  # ValueError: a NUL in a listed name
            if path.resolve().is_relative_to(root):
                path.unlink()
    if source.startswith("simulate-"):
        # Its node launchers' runs are in node-<k>/: each is cleared the same way, and the
        # folder goes once empty, so that logs and report never take them for this run's.
        for folder in log_dir.glob("node-*"):
            if folder.is_dir() and not folder.is_symlink():
                clear_previous_run(folder)
                with contextlib.suppress(OSError):
                    folder.rmdir()


def remove_node_folders(log_dir: Path, first: int) -> None:
    """Remove ``node-<k>.log`` and the ``node-<k>/`` folders of a simulation for k >= ``first``.

    Only folders a node launcher wrote (with its manifest or summary) go: a user's own
    ``node-3/`` beside them stays.
    """
    for path in log_dir.glob("node-*"):
        number = path.name[len("node-") :].removesuffix(".log")
        if not (number.isascii() and number.isdigit()) or int(number) < first:
            continue
        if path.is_file() and path.suffix == ".log":
            with contextlib.suppress(OSError):
                path.unlink()
        elif path.is_dir() and any((path / name).exists() for name in (MANIFEST, SUMMARY)):
            shutil.rmtree(path, ignore_errors=True)


class RunLog:
    """Writes the manifest and the line index of this launcher's run."""

    def __init__(self, log_dir: str, plan: LaunchPlan, started: float) -> None:
        self.dir = Path(log_dir)
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
            clear_previous_run(self.dir)
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


def _why(exc: BaseException) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
