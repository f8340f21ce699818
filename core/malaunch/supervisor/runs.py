"""A log dir's runs: each launch writes into a folder of its own; ``latest`` names the newest.

::

    <log dir>/
      run-20261126-031502-4173f9/      one launch: rank logs, manifest, index, summary, ...
      run-20261126-041733-052b07/
      latest -> run-20261126-041733-052b07   (a symlink; a file holding the name where the
                                              filesystem has no symlinks)

A run folder is named after the UTC time its launch began: the date, the time to the second,
then six characters, the milliseconds and three random hex digits. Names sort by time, and two
launches in the same millisecond never share one (the folder is made with ``mkdir``, never
reused: a name taken is drawn again). It is made before the topology wait, and the plan sees
it as its log dir. Once its first processes have started (:meth:`RunFolder.started`) it
becomes ``latest``, and the oldest runs beyond ``--keep-runs`` are removed, each said on the
console. A launch that ends before that never becomes ``latest`` and never costs an earlier
run: its folder goes, or stays with only the summary that says why it stopped when it wrote
one (a stage-in that failed, node 0 stopped by another node); such folders are kept up to
``--keep-runs`` too, counted apart from the runs.

While it runs, a launcher holds an exclusive lock (``flock``) on its run's ``.malaunch-lock``:
pruning passes over a locked run, so launches sharing a log dir (two jobs in one folder, the
nodes of a job on a shared filesystem) never remove each other's live run. Where the
filesystem cannot lock, a run without a summary counts as live.

``malaunch logs`` and ``malaunch report`` read a log dir through :func:`current_run`.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from malaunch.errors import MissingInputError, UsageError
from malaunch.files import check_directory, read_pointer, remove_empty, write_pointer
from malaunch.log import logger, shown

MANIFEST = "malaunch-run.json"
INDEX = "malaunch-index.bin"
SUMMARY = "malaunch-summary.json"
LATEST = "latest"
LOCK = ".malaunch-lock"
RUN_NAME = re.compile(r"run-\d{8}-\d{6}-\d{3}[0-9a-f]{3}")
DEFAULT_KEEP_RUNS = 10


def run_name(now: float, token: str) -> str:
    """``run-YYYYMMDD-HHMMSS-mmm<token>``: the time in UTC, its milliseconds, then ``token``
    (three hex digits)."""
    moment = datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc)
    return f"run-{moment:%Y%m%d-%H%M%S}-{moment.microsecond // 1000:03d}{token}"


def runs_in(root: Path) -> List[Path]:
    """The run folders directly in ``root``, oldest first (real folders, never a link)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    found = [
        Path(entry.path)
        for entry in entries
        if RUN_NAME.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
    ]
    return sorted(found, key=lambda path: path.name)


def holds_run(folder: Path) -> bool:
    """Whether a run has written its manifest or summary in ``folder``."""
    return (folder / MANIFEST).is_file() or (folder / SUMMARY).is_file()


def current_run(root: Path) -> Optional[Path]:
    """The run a log dir stands for: the one ``latest`` names, else the newest run folder
    holding a manifest (a run that started). None when ``root`` keeps no such folders (a run
    folder itself, a simulate run's ``node-<k>/``, a log dir of an earlier malaunch, a folder
    of collected node dirs), which is then read as it is."""
    name = read_pointer(root / LATEST)
    # Only a run folder of this log dir, as runs_in() finds them: never a link named like one
    # (which could lead anywhere, and hide the real newest run).
    if name is not None and RUN_NAME.fullmatch(name) and _real_folder(root / name):
        return root / name
    started = [path for path in runs_in(root) if (path / MANIFEST).is_file()]
    return started[-1] if started else None


def _real_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def run_to_read(directory: Path) -> Path:
    """What ``malaunch report`` reads for ``directory``: its current run (named on stderr),
    else the directory itself."""
    run = current_run(directory)
    if run is None:
        return directory
    logger.info(f"reading the latest run in {directory}: {run.name}")
    return run


def pick_run(root: Path, name: str) -> Path:
    """``--run NAME``: the run folder ``name`` in ``root``.

    :raises MissingInputError: no such run there (the message lists the runs there are).
    """
    runs = runs_in(root)
    chosen = [path for path in runs if path.name == name]
    if chosen:
        return chosen[0]
    names = [path.name for path in runs]
    listed = ", ".join(names[-5:]) + (f" (and {len(names) - 5} older)" if len(names) > 5 else "")
    there = f"runs there, oldest first: {listed}" if names else "it holds no run folders"
    msg = f"--run {shown(name)}: no such run in {root}; {there}"
    raise MissingInputError(msg)


def check_log_dir(log_dir: Path, origin: str, create: bool) -> Optional[Path]:
    """:class:`UsageError` (64) naming ``origin`` when no file can be made in ``log_dir``; a
    launch creates it, a dry run only looks (see :func:`malaunch.files.check_directory`).
    Returns the topmost folder created, if any."""
    try:
        return check_directory(log_dir, create)
    except FileExistsError as exc:
        there = "it" if exc.filename in (None, str(log_dir)) else exc.filename
        msg = f"{origin}: cannot create the log directory: {there} exists and is not a directory"
        raise UsageError(msg) from exc
    except OSError as exc:
        what = (
            "create files in the log directory"
            if os.path.isdir(log_dir)
            else "create the log directory"
        )
        msg = f"{origin}: cannot {what}: {exc.strerror or exc}"
        raise UsageError(msg) from exc


class RunFolder:
    """This launch's run folder in a log dir, from its creation to its launcher's end.

    ``managed=False``: the folder was given as it is (a ``simulate`` node launcher's
    ``node-<k>/``, inside its parent's run): no pointer, no pruning, never removed here.
    """

    def __init__(self, root: Path, path: Path, keep: int, managed: bool) -> None:
        self.root = root
        self.path = path
        self.keep = keep
        self.managed = managed
        self.made_root: Optional[Path] = None  # the topmost folder made for the log dir
        self.is_started = False
        self.lock_fd = -1

    @classmethod
    def create(cls, root: Path, origin: str, keep: int, now: Callable[[], float]) -> RunFolder:
        """Make the log dir (checked as :func:`check_log_dir`) and a new run folder in it.

        :raises UsageError: the log dir or the folder cannot be made (64, naming ``origin``).
        """
        made = check_log_dir(root, origin, create=True)
        if not runs_in(root) and holds_run(root):
            logger.info(
                f"{shown(str(root))} holds a run of an earlier malaunch, its files directly "
                f"in the log dir: kept as it is; each run now goes to a run-* folder of its own"
            )
        for _ in range(16):
            path = root / run_name(now(), secrets.token_hex(2)[:3])
            try:
                path.mkdir()
            except FileExistsError:
                continue
            except OSError as exc:
                if made is not None:
                    remove_empty(root, made)
                msg = f"{origin}: cannot create a run folder in the log directory: {exc.strerror}"
                raise UsageError(msg) from exc
            folder = cls(root, path, keep, managed=True)
            folder.made_root = made
            folder.lock()
            return folder
        msg = f"{origin}: cannot find a free run folder name in the log directory"
        raise UsageError(msg)

    @classmethod
    def given(cls, path: Path, origin: str, create: bool) -> RunFolder:
        """``path`` itself as the run folder, made (``create``) but otherwise left alone."""
        folder = cls(path, path, 0, managed=False)
        folder.made_root = check_log_dir(path, origin, create)
        return folder

    def lock(self) -> None:
        """Hold the run's lock while this launcher lives (released by :meth:`close`, or by
        the system when the launcher dies)."""
        try:
            fd = os.open(self.path / LOCK, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            logger.debug(f"no lock on {self.path}: {exc}")
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:  # a filesystem without locks: pruning then asks the summary
            logger.debug(f"no lock on {self.path}: {exc}")
        self.lock_fd = fd

    def started(self) -> None:
        """This run's first processes have started: it becomes ``latest``, and the oldest
        runs beyond ``keep`` go (each said on the console)."""
        if self.is_started or not self.managed:
            self.is_started = True
            return
        self.is_started = True
        try:
            write_pointer(self.root / LATEST, self.path.name)
        except OSError as exc:
            logger.warning(f"cannot point {self.root / LATEST} at {self.path.name}: {exc}")
        self._prune()

    def close(self) -> None:
        """The launcher is done. A launch that ended before starting a process keeps its
        folder only when it wrote its summary there (the error that stopped it, node 0's
        ``stopped_by``), never as ``latest``; earlier runs are untouched. The lock goes."""
        ended_early = self.managed and not self.is_started
        if ended_early and not (self.path / SUMMARY).is_file():
            shutil.rmtree(self.path, ignore_errors=True)
        elif self.managed:
            with contextlib.suppress(OSError):
                os.unlink(self.path / LOCK)
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1
        if ended_early and self.path.is_dir():
            self._prune()  # other launches that ended early: a crash loop stays bounded
        if self.made_root is not None and not self.is_started:
            remove_empty(self.root, self.made_root)

    def _prune(self) -> None:
        for path, started in prune(self.root, self.keep, self.path, self.is_started):
            what = "the run" if started else "the folder of a launch that ended before starting,"
            logger.info(f"removed {what} {path} (--keep-runs {self.keep}: the newest are kept)")


def prune(root: Path, keep: int, current: Path, started: bool) -> List[Tuple[Path, bool]]:
    """Remove the oldest run folders of ``root`` beyond ``keep`` (0: keep all), ``current``
    counted, each kind apart: runs that started (their manifest is there) and launches that
    ended before starting (only a summary); a launch that ended early never costs a run. A
    folder whose launcher still runs is passed over. A launch that ended early prunes only
    its own kind. Returns each folder removed, and whether it had started."""
    if keep <= 0:
        return []
    others = [path for path in runs_in(root) if path != current]
    kinds = {True: [p for p in others if (p / MANIFEST).is_file()]}
    kinds[False] = [p for p in others if p not in kinds[True]]
    removed = []
    for kind in (True, False) if started else (False,):
        paths = kinds[kind]
        excess = len(paths) + (1 if kind == started else 0) - keep
        removed += [(path, kind) for path in paths[: max(0, excess)] if _remove_finished(path)]
    return removed


def _remove_finished(path: Path) -> bool:
    """Remove a run folder unless its launcher still holds its lock."""
    try:
        fd = os.open(path / LOCK, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        fd = -1  # its launcher has ended
    except OSError:
        return False
    try:
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                held = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
                if held or not (path / SUMMARY).is_file():  # no locks here: ask the summary
                    logger.info(f"kept the run {path}: its launcher is still running")
                    return False
        shutil.rmtree(path, ignore_errors=True)
        if os.path.lexists(path):  # a file it may not delete, a busy mount
            logger.warning(f"could not remove all of the run {path}: what is left stays")
            return False
        return True
    finally:
        if fd >= 0:
            os.close(fd)
