"""A log dir's runs: each launch writes into a folder of its own; ``latest`` names the newest.

::

    <log dir>/
      run-20261126-031502-3f9a1c/      one launch: rank logs, manifest, index, summary, ...
      run-20261126-041733-b07e52/
      latest -> run-20261126-041733-b07e52   (a symlink; a file holding the name where the
                                              filesystem has no symlinks)

A run folder is named after the UTC time its launch began, to the second, and six random hex
digits: names sort by time, and two launches in the same second never share one (the folder
is made with ``mkdir``, never reused). It is made before the topology wait, and the plan sees
it as its log dir. Once its first processes have started (:meth:`RunFolder.started`) it
becomes ``latest``, and the oldest runs beyond ``--keep-runs`` are removed, each said on the
console. A launch that ends before that removes its own folder and touches nothing else, so
a launch that fails early never costs an earlier run.

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
from typing import Callable, List, Optional

from malaunch.errors import MissingInputError, UsageError
from malaunch.files import check_directory, read_pointer, remove_empty, write_pointer
from malaunch.log import logger, shown

MANIFEST = "malaunch-run.json"
INDEX = "malaunch-index.bin"
SUMMARY = "malaunch-summary.json"
LATEST = "latest"
LOCK = ".malaunch-lock"
RUN_NAME = re.compile(r"run-\d{8}-\d{6}-[0-9a-f]{6}")
DEFAULT_KEEP_RUNS = 10


def run_name(now: float, token: str) -> str:
    """``run-YYYYMMDD-HHMMSS-<token>``, the time in UTC."""
    moment = datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc)
    return f"run-{moment:%Y%m%d-%H%M%S}-{token}"


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
    holding a run. None when ``root`` keeps no run folders (a run folder itself, a simulate
    run's ``node-<k>/``, a log dir of an earlier malaunch, a folder of collected node dirs),
    which is then read as it is."""
    name = read_pointer(root / LATEST)
    if name is not None and RUN_NAME.fullmatch(name) and (root / name).is_dir():
        return root / name
    started = [path for path in runs_in(root) if holds_run(path)]
    return started[-1] if started else None


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
            path = root / run_name(now(), secrets.token_hex(3))
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
        for path in prune(self.root, self.keep, self.path):
            logger.info(f"removed the run {path} (--keep-runs {self.keep}: the newest are kept)")

    def close(self) -> None:
        """The launcher is done: a run that never started anything leaves nothing behind
        (earlier runs and ``latest`` were never touched); the lock goes."""
        if self.managed and not self.is_started:
            shutil.rmtree(self.path, ignore_errors=True)
        elif self.managed:
            with contextlib.suppress(OSError):
                os.unlink(self.path / LOCK)
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1
        if self.made_root is not None and not self.is_started:
            remove_empty(self.root, self.made_root)


def prune(root: Path, keep: int, current: Path) -> List[Path]:
    """Remove the oldest run folders of ``root`` so that ``keep`` remain with ``current``
    (``keep`` 0: all are kept); a run whose launcher still runs is passed over. Returns the
    folders removed."""
    if keep <= 0:
        return []
    others = [path for path in runs_in(root) if path != current]
    removed = []
    for path in others[: max(0, len(others) + 1 - keep)]:
        if _remove_finished(path):
            removed.append(path)
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
