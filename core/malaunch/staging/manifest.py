"""What was transferred, so that unchanged files are not transferred again; and the lock that
lets two nodes stage into one shared directory.

Neither lives in the data: a job that lists its data folder must find only its data. Both go to
a hidden folder beside the LOCAL, in its parent: ``<parent>/.malaunch-stage/<name>.in.json``
and ``<name>.in.lock`` for a stage-in of ``<parent>/<name>`` (a folder or one file), and
``<name>.out.json`` for a stage-out. Beside, not in a per-node folder: nodes that share the
filesystem of the data share the lock too. Only where the parent may not be written does the
folder go inside a LOCAL folder (:func:`manifest_place`).

A stage-in manifest holds per file the source's size and ETag (S3) or modification time (other
filesystems), and the local copy's size and mtime: a file is fetched again when the source or
the local copy changed. A stage-out manifest holds the local size and mtime of each file when
it was uploaded. Both are written atomically, and hold the URL they are for: a manifest of
another URL counts as empty.

Earlier versions kept the manifest inside the data (``.malaunch-stage-in.json`` in the folder,
``.<name>.malaunch-stage-in.json`` beside a single file, with its ``.lock``). Such a manifest
is read once, when there is none in the new place (an upgrade transfers nothing again), and is
removed with its lock once the new one is saved.

Two launchers staging the same mapping into one shared directory (an NFS mount, or nodes of
``malaunch simulate`` on one machine) take ``flock`` on the lock: one transfers while the other
waits, then finds everything up to date.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional

from malaunch.files import read_regular, write_atomic
from malaunch.jsontext import loads
from malaunch.progress import Waiting
from malaunch.staging.localfs import PARTIAL

VERSION = 1
FOLDER = ".malaunch-stage"  # beside each LOCAL: its manifests and lock
PREFIX = ".malaunch-stage-"  # the manifests and locks of earlier versions, inside the data
SAVE_EVERY = 2.0
MAX_MANIFEST = 256 * 1024 * 1024  # about 1.5 million files' entries
Entry = Dict[str, Any]


def own_file(name: str) -> bool:
    """Whether a file or folder name is staging's own (its folder, an earlier version's
    manifest or lock, a partial download): never listed, uploaded or staged."""
    return name == FOLDER or PREFIX in name or name.endswith(PARTIAL)


def manifest_path(target: Path, direction: str) -> Path:
    """Where the manifest of a mapping whose local side is ``target`` lives: in
    :data:`FOLDER` beside it. Its lock is the same path ending in ``.lock``."""
    place = Path(os.path.abspath(target))  # "data/.." names the folder it is
    return place.parent / FOLDER / f"{place.name or 'root'}.{direction}.json"


def manifest_place(target: Path, direction: str, is_dir: bool) -> Path:
    """:func:`manifest_path`, its folder made. For a folder whose parent may not be written (a
    volume mounted at ``/data`` in a container whose ``/`` is read-only, or root's), the one
    place left on the data's filesystem: ``<target>/.malaunch-stage/``.

    :raises OSError: neither can be made.
    """
    path = manifest_path(target, direction)
    try:
        path.parent.mkdir(exist_ok=True)
        return path
    except OSError as exc:
        if not is_dir or exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
    inside = Path(os.path.abspath(target)) / FOLDER / path.name
    inside.parent.mkdir(exist_ok=True)
    return inside


def legacy_path(target: Path, direction: str, is_dir: bool) -> Path:
    """Where an earlier version kept that manifest: inside the data."""
    name = f"{PREFIX}{direction}.json"
    return target / name if is_dir else target.parent / f".{target.name}{name}"


class Manifest:
    """The entries of one mapping, shared by the transfer threads; saved at most every
    :data:`SAVE_EVERY` seconds while they run, so that an interrupted stage-in resumes."""

    def __init__(
        self,
        path: Path,
        url: str,
        clock: Callable[[], float] = time.monotonic,
        legacy: Optional[Path] = None,
    ) -> None:
        self.path = path
        self.url = url
        self.clock = clock
        self.lock = threading.Lock()
        self.saved = clock()
        # an earlier version's manifest: read if there is none here, removed at the first save
        self.legacy = legacy if legacy is not None and os.path.lexists(legacy) else None
        entries = _read(path, url)
        if entries is None and self.legacy is not None:
            entries = _read(self.legacy, url)
        self.entries: Dict[str, Entry] = entries or {}

    def get(self, name: str) -> Optional[Entry]:
        with self.lock:
            return self.entries.get(name)

    def put(self, name: str, entry: Entry) -> None:
        """Record a finished transfer; save now and then."""
        with self.lock:
            self.entries[name] = entry
            due = self.clock() - self.saved >= SAVE_EVERY
        if due:
            self.save()

    def drop(self, name: str) -> None:
        with self.lock:
            self.entries.pop(name, None)

    def save(self) -> None:
        with self.lock:
            document = {"version": VERSION, "url": self.url, "files": dict(self.entries)}
            self.saved = self.clock()
        write_atomic(self.path, json.dumps(document, indent=0, sort_keys=True) + "\n")
        if self.legacy is not None:
            for old in (self.legacy, self.legacy.with_suffix(".lock")):
                with contextlib.suppress(OSError):
                    old.unlink()
            self.legacy = None


def _read(path: Path, url: str) -> Optional[Dict[str, Entry]]:
    """The entries of the manifest at ``path`` for ``url``; ``None`` if there is none."""
    try:
        document = loads(read_regular(path, MAX_MANIFEST).decode("utf-8"))
    except (OSError, ValueError):  # jsontext's depth and integer limits are ValueErrors
        return None  # none yet, or unreadable, damaged, a FIFO: transfer everything again
    if not isinstance(document, dict) or document.get("url") != url:
        return {}
    files = document.get("files")
    if document.get("version") != VERSION or not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(v, dict)}


def local_state(path: Path) -> Optional[Entry]:
    """Size and mtime (ns) of a local regular file; ``None`` if it is not one."""
    try:
        info = path.stat()
    except OSError:
        return None
    if not path.is_file():
        return None
    return {"local_size": info.st_size, "local_mtime_ns": info.st_mtime_ns}


@contextlib.contextmanager
def exclusive(lock_file: Path, what: str, stop: threading.Event) -> Iterator[None]:
    """Hold ``flock`` on ``lock_file``; while another process holds it, say so and wait."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    # non-blocking: a FIFO put in the lock's place must not hang the open
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    try:
        waiting = Waiting(f"another launcher staging {what}")
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waiting.update(f"lock {lock_file}")
                if stop.wait(0.2):
                    waiting.done()
                    raise InterruptedError(f"stopped while waiting for {lock_file}") from None
        waiting.done()
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
