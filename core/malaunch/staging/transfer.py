"""One file, one direction, retried with backoff, never half-written at the destination.

A download goes to a temporary name in the destination directory
(``.<name>.<random>.malaunch-partial``), is checked against the listed size and renamed over
the target, which POSIX makes atomic. An upload to S3 or OBS goes straight to its key: a
single PUT is atomic by nature, and s3fs completes a multipart upload (files of 100 MiB and
more) only when every part is in, and aborts it on failure, so an object is either the whole
new file or not there. An upload to any other filesystem goes to a temporary name beside the
target and is moved over it.

Network and server failures are retried (:class:`RetryPolicy`); a missing bucket or key, a
refused permission and a full disk are not, since trying again cannot help.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Set, TypeVar

from malaunch.errors import MalaunchError, MissingInputError
from malaunch.log import logger
from malaunch.staging.errors import StagingError
from malaunch.staging.localfs import PARTIAL, Sink, local, local_error
from malaunch.staging.models import RetryPolicy
from malaunch.staging.progress import Progress
from malaunch.staging.readers import Reader, size_error
from malaunch.wording import plural

T = TypeVar("T")
NOTES_EVERY = 5.0  # seconds between two lines about retries
_PERMANENT_ERRNOS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENAMETOOLONG,
}
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)
_NO_CREDENTIALS = ("NoCredentialsError", "PartialCredentialsError")
# botocore refusing a request before sending it (a bucket name S3 does not allow): no retry helps
_INVALID_REQUEST = ("ParamValidationError",)


class Cancelled(Exception):
    """The stager was told to stop (:meth:`Stager.cancel`, a deadline)."""


def transient(exc: BaseException) -> bool:
    """Whether trying again may help: the network or the server, not the request or the disk."""
    if isinstance(exc, _PERMANENT) or type(exc).__name__ in (*_NO_CREDENTIALS, *_INVALID_REQUEST):
        return False
    if isinstance(exc, OSError) and exc.errno in _PERMANENT_ERRNOS:
        return False
    return not isinstance(exc, (ValueError, TypeError, AttributeError, KeyError, Cancelled))


def describe(exc: BaseException) -> str:
    """One line: the exception's type and message."""
    text = " ".join(str(exc).split()) or "no details"
    return f"{type(exc).__name__}: {text[:300]}"


def no_credentials(exc: BaseException) -> bool:
    return type(exc).__name__ in _NO_CREDENTIALS


class RetryNotes:
    """The retry warnings of a stager, aggregated: 32 transfers in flight against a server that
    went away would otherwise log a line per file per try before the one error line.

    The first retry is told at once (``URL: error; retrying in 1.0s``); the next ones at most
    every :data:`NOTES_EVERY` seconds, counted, with the last of them; :meth:`flush` tells
    what is left (at the end of each pass, before its result or error). Any thread.
    """

    def __init__(self, clock: Callable[[], float], every: float = 0.0) -> None:
        self.clock = clock
        self.every = every or NOTES_EVERY
        self.next_line: Optional[float] = None
        self.count = 0
        self.urls: Set[str] = set()
        self.last = ""
        self.lock = threading.Lock()

    def note(self, url: str, error: str, delay: float) -> None:
        line = f"{url}: {error}; retrying in {delay:.1f}s"
        with self.lock:
            now = self.clock()
            if self.next_line is None or (now >= self.next_line and not self.count):
                self.next_line = now + self.every
                logger.warning(line)
                return
            self.count += 1
            self.urls.add(url)
            self.last = line
            if now >= self.next_line:
                self._tell(now)

    def flush(self) -> None:
        with self.lock:
            if self.count:
                self._tell(self.clock())
            self.next_line = None

    def _tell(self, now: float) -> None:
        files = plural(len(self.urls), "file")
        logger.warning(f"{plural(self.count, 'more retry')} of {files} (the last: {self.last})")
        self.count, self.urls, self.last = 0, set(), ""
        self.next_line = now + self.every


def retrying(
    action: Callable[[], T],
    url: str,
    retry: RetryPolicy,
    stop: threading.Event,
    undo: Callable[[], None] = lambda: None,
    *,
    notes: Optional[RetryNotes] = None,
) -> T:
    """``action()``, tried again after transient failures; ``undo()`` after each failure;
    each retry told to ``notes`` (or logged alone without).

    :raises StagingError: still failing after ``retry.attempts`` tries, or a permanent failure
        (the message names ``url``).
    :raises Cancelled: ``stop`` was set while waiting.
    """
    failures = 0
    while True:
        try:
            return action()
        except Exception as exc:
            undo()
            if isinstance(exc, (Cancelled, MalaunchError)):
                raise  # MalaunchError: a local error, classified already; trying again won't help
            if isinstance(exc, FileNotFoundError):
                msg = f"{url}: no such file, bucket or key ({describe(exc)})"
                raise MissingInputError(msg) from exc
            failures += 1
            if not transient(exc) or failures >= retry.attempts:
                tries = f" after {failures} attempts" if failures > 1 else ""
                msg = f"{url}: {describe(exc)}{tries}"
                raise StagingError(msg) from exc
            delay = retry.delay(failures)
            if notes is not None:
                notes.note(url, describe(exc), delay)
            else:
                logger.warning(f"{url}: {describe(exc)}; retrying in {delay:.1f}s")
            if stop.wait(delay):
                raise Cancelled(url) from exc


def _callback(progress: Progress, counted: list, stop: threading.Event, url: str) -> Any:  # type: ignore[type-arg]
    """An fsspec callback that adds bytes to ``progress`` and remembers how many; once
    ``stop`` is set it ends the transfer (s3fs aborts a multipart upload it interrupts)."""
    from fsspec.callbacks import Callback  # noqa: PLC0415 (fsspec is imported lazily)

    class Counting(Callback):  # type: ignore[misc]
        def relative_update(self, inc: int = 1) -> None:
            if stop.is_set():
                raise Cancelled(url)
            counted[0] += inc
            progress.add(inc)

        def absolute_update(self, value: int) -> None:
            self.relative_update(value - counted[0])

    return Counting()


# The temporary files of the downloads under way (any thread), so that a launcher that leaves
# a stuck transfer behind (a request in a dead connection) can take its half-written file away.
_unfinished: Set[Path] = set()
_unfinished_lock = threading.Lock()


def _unfinished_add(path: Path) -> None:
    with _unfinished_lock:
        _unfinished.add(path)


def _unfinished_done(path: Path) -> None:
    with _unfinished_lock:
        _unfinished.discard(path)


def remove_unfinished() -> int:
    """Remove the temporary file of every download still under way (their threads are being
    left behind: a later write of theirs goes to a file without a name); how many there were."""
    with _unfinished_lock:
        paths = list(_unfinished)
        _unfinished.clear()
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()
    return len(paths)


def download(
    reader: Reader,
    rpath: str,
    target: Path,
    *,
    entry: Dict[str, Any],
    progress: Progress,
    url: str,
    **kw: Any,
) -> Dict[str, Any]:
    """Copy ``rpath`` to ``target`` through a temporary name, checking the size against its
    listing ``entry``; the entry of what was read (the ETag the read saw)."""
    temporary = target.parent / f".{target.name}.{uuid.uuid4().hex[:12]}{PARTIAL}"
    counted = [0]
    seen: Dict[str, Any] = dict(entry)

    stop: threading.Event = kw["stop"]

    def count(length: int) -> None:
        # Called for every piece: a cancel (a signal, a deadline) ends a long file at once
        # instead of when it is complete; undo() removes the temporary file.
        if stop.is_set():
            raise Cancelled(url)
        counted[0] += length
        progress.add(length)

    def action() -> None:
        counted[0] = 0
        with local(target, reading=False, direction="in"):
            target.parent.mkdir(parents=True, exist_ok=True)
            # unbuffered: a full disk fails the write that found it, in the Sink, not a close
            out = open(temporary, "wb", buffering=0)  # noqa: SIM115 (closed below, checked)
        _unfinished_add(temporary)
        try:
            got = reader(rpath, entry, Sink(out, target), count)
        except BaseException:
            with contextlib.suppress(OSError):
                out.close()
            raise
        with local(target, reading=False, direction="in"):
            out.close()  # NFS reports a failed write back here
        if counted[0] != got["size"]:
            raise size_error(counted[0], got["size"])
        seen.update(got)  # one GET of a version newer than listed: record what was read
        with local(target, reading=False, direction="in"):
            os.replace(temporary, target)
        _unfinished_done(temporary)

    def undo() -> None:
        progress.add(-counted[0])
        _unfinished_done(temporary)
        with contextlib.suppress(OSError):
            temporary.unlink()

    retrying(action, url, undo=undo, **kw)
    return seen


def upload(
    fs: Any,
    source: Path,
    rpath: str,
    *,
    atomic: bool,
    progress: Progress,
    url: str,
    local_destination: bool = False,
    **kw: Any,
) -> None:
    """Copy ``source`` to ``rpath`` of ``fs``: directly where a PUT is atomic (S3), else
    through a temporary name beside it. ``local_destination``: ``fs`` is this machine's
    (``file://``), whose errors are a local destination's."""
    temporary: Optional[str] = None if atomic else _beside(rpath)
    counted = [0]

    def action() -> None:
        counted[0] = 0
        callback = _callback(progress, counted, kw["stop"], url)
        try:
            if temporary is None:
                fs.put_file(str(source), rpath, callback=callback)
            else:
                fs.makedirs(fs._parent(rpath), exist_ok=True)
                fs.put_file(str(source), temporary, callback=callback)
                fs.mv(temporary, rpath)
            size = source.stat().st_size
        except OSError as exc:
            mapped = _local_side(exc, source, rpath, local_destination)
            if mapped is None:
                raise  # the server's, or the network's
            raise mapped from exc
        progress.add(size - counted[0])

    def undo() -> None:
        progress.add(-counted[0])
        if temporary is not None:
            with contextlib.suppress(Exception):
                fs.rm_file(temporary)

    retrying(action, url, undo=undo, **kw)


def _local_side(
    exc: OSError, source: Path, rpath: str, local_destination: bool
) -> Optional[MalaunchError]:
    """An upload's error that is this machine's filesystem's, as :func:`local_error` says."""
    if isinstance(exc, InterruptedError):
        return None
    if exc.filename is not None and str(exc.filename) == str(source):
        return local_error(exc, source, reading=True, direction="out")
    if local_destination:
        return local_error(exc, rpath, reading=False, direction="out")
    return None


def _beside(rpath: str) -> str:
    parent, _, name = rpath.rstrip("/").rpartition("/")
    hidden = f".{name}.{uuid.uuid4().hex[:12]}{PARTIAL}"
    return f"{parent}/{hidden}" if parent else hidden
