"""What was transferred, so that unchanged files are not transferred again; and the lock that
lets two nodes stage into one shared directory.

A stage-in keeps ``.malaunch-stage-in.json`` in the destination directory (beside the file, as
``.<name>.malaunch-stage-in.json``, for a single file): per file the source's size and ETag (S3)
or modification time (other filesystems), and the local copy's size and mtime. A file is
fetched again when the source or the local copy changed. A stage-out keeps
``.malaunch-stage-out.json`` the same way in the uploaded directory: the local size and mtime
of each file when it was uploaded. Both are written atomically, and hold the URL they are for:
a manifest of another URL counts as empty.

Two launchers staging the same mapping into one shared directory (an NFS mount, or nodes of
``malaunch simulate`` on one machine) take ``flock`` on ``.malaunch-stage-in.lock`` beside the
manifest: one transfers while the other waits, then finds everything up to date.
"""

from __future__ import annotations

import contextlib
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

VERSION = 1
PREFIX = ".malaunch-stage-"
PARTIAL = ".malaunch-partial"
SAVE_EVERY = 2.0
MAX_MANIFEST = 256 * 1024 * 1024  # about 1.5 million files' entries
Entry = Dict[str, Any]


def own_file(name: str) -> bool:
    """Whether a file name is staging's own (manifest, lock, partial download)."""
    return PREFIX in name or name.endswith(PARTIAL)


def manifest_path(target: Path, direction: str, is_dir: bool) -> Path:
    """Where the manifest of a mapping whose local side is ``target`` lives."""
    name = f"{PREFIX}{direction}.json"
    return target / name if is_dir else target.parent / f".{target.name}{name}"


class Manifest:
    """The entries of one mapping, shared by the transfer threads; saved at most every
    :data:`SAVE_EVERY` seconds while they run, so that an interrupted stage-in resumes."""

    def __init__(self, path: Path, url: str, clock: Callable[[], float] = time.monotonic):
        self.path = path
        self.url = url
        self.clock = clock
        self.entries: Dict[str, Entry] = {}
        self.lock = threading.Lock()
        self.saved = clock()
        try:
            document = loads(read_regular(path, MAX_MANIFEST).decode("utf-8"))
        except (OSError, ValueError):  # jsontext's depth and integer limits are ValueErrors
            return  # none yet, or unreadable, damaged, a FIFO: transfer everything again
        if isinstance(document, dict) and document.get("url") == url:
            files = document.get("files")
            if document.get("version") == VERSION and isinstance(files, dict):
                self.entries = {k: v for k, v in files.items() if isinstance(v, dict)}

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
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
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
