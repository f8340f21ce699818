"""The local filesystem as staging meets it: what each of its errors means for the user, and
the files staging never opens.

Staging writes the destination of a stage-in (with its manifest and lock) and reads the LOCAL
of a stage-out, and a ``file://`` URL is on a local filesystem too. Every ``OSError`` of those
goes through :func:`local_error`, one mapping by errno class, so that a new errno lands in a
class instead of becoming an "internal error":

- **64**, a destination that cannot be what it must be: a path through a file (``ENOTDIR``), a
  file where a folder must be (``EEXIST``), a folder where a file must be (``EISDIR``), a loop
  of links (``ELOOP``), a name the filesystem refuses (``ENAMETOOLONG``);
- **66**, a source that is missing or unreadable: ``ENOENT``, ``ENOTDIR``, ``ELOOP``,
  ``ENAMETOOLONG``, ``EACCES``, ``EPERM``;
- **74**, every other: the disk (``EIO``, ``ENOSPC``, ``EDQUOT``, ``EFBIG``), a read-only
  filesystem (``EROFS``), a destination this process may not write (``EACCES``).

A FIFO, socket or device, given as a LOCAL or found in one (or in a ``file://`` source), is
skipped with a warning and never opened: opening a FIFO blocks until a writer comes, reading a
device may never end, and a download renamed over ``/dev/null`` would replace the device.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from pathlib import Path
from typing import BinaryIO, Dict, Iterator, Optional, Set, Type, Union

from malaunch.errors import ExitCode, MalaunchError, MissingInputError, UsageError
from malaunch.files import kind_of
from malaunch.log import logger
from malaunch.staging.errors import StagingError

PARTIAL = ".malaunch-partial"  # a download's temporary name ends so (transfer.py)

_NOT_A_PLACE = frozenset(
    {errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.ELOOP, errno.ENAMETOOLONG}
)
_UNREADABLE = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM}
)
_CLASSES: Dict[ExitCode, Type[MalaunchError]] = {
    ExitCode.USAGE: UsageError,
    ExitCode.NO_INPUT: MissingInputError,
    ExitCode.IO_ERROR: StagingError,
}


def exit_code(number: Optional[int], reading: bool) -> ExitCode:
    """The exit code of a local ``OSError`` with errno ``number``, met while reading a source
    (``reading``) or writing a destination."""
    if reading:
        return ExitCode.NO_INPUT if number in _UNREADABLE else ExitCode.IO_ERROR
    return ExitCode.USAGE if number in _NOT_A_PLACE else ExitCode.IO_ERROR


def local_error(
    exc: OSError, path: Union[str, Path], *, reading: bool, direction: str
) -> MalaunchError:
    """The one-line error of a local ``OSError``, of the class :func:`exit_code` says.

    The path named is the one the error names, unless that is a download's temporary name
    (then ``path``, the file it was for); ``direction`` is ``in`` or ``out``.
    """
    named = exc.filename if isinstance(exc.filename, (str, Path)) else None
    if named is None or str(named).endswith(PARTIAL):
        named = path
    text = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    verb = "read" if reading else "write"
    cls = _CLASSES[exit_code(exc.errno, reading)]
    return cls(f"stage-{direction}: cannot {verb} {named}: {text}")


@contextlib.contextmanager
def local(path: Union[str, Path], *, reading: bool, direction: str) -> Iterator[None]:
    """Turn the ``OSError`` of a local file operation into :func:`local_error`'s error.

    ``InterruptedError`` passes: staging raises it itself when told to stop.
    """
    try:
        yield
    except InterruptedError:
        raise
    except OSError as exc:
        raise local_error(exc, path, reading=reading, direction=direction) from exc


def special(path: Path) -> Optional[str]:
    """What ``path`` (links followed) is when it is a FIFO, socket or device; ``None`` for a
    regular file, a directory, or nothing there. Never opens it."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, a dangling link; ValueError: a NUL in the name
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return kind_of(mode)


class Skips:
    """Says once per path that a FIFO, socket or device was skipped: periodic stage-out passes
    meet it again every interval. Any thread."""

    def __init__(self) -> None:
        self.seen: Set[str] = set()
        self.lock = threading.Lock()

    def skip(self, path: Union[str, Path], kind: str, direction: str) -> None:
        with self.lock:
            if str(path) in self.seen:
                return
            self.seen.add(str(path))
        logger.warning(f"stage-{direction}: {path} is a {kind}, not a regular file: skipped")


class Sink:
    """The temporary file of a download, opened unbuffered: what a reader writes, whose errors
    are the destination's (``target``'s)."""

    def __init__(self, handle: BinaryIO, target: Path) -> None:
        self.handle = handle
        self.target = target
        self.offset = 0

    def write(self, data: bytes) -> None:
        """``data`` at the end of what :meth:`write` wrote before."""
        self.write_at(data, self.offset)
        self.offset += len(data)

    def write_at(self, data: bytes, offset: int) -> None:
        """``data`` at ``offset`` (the pieces of a ranged read come in any order)."""
        view = memoryview(data)
        with local(self.target, reading=False, direction="in"):
            while view:  # a write may take less than all, as on a disk that just filled
                done = os.pwrite(self.handle.fileno(), view, offset)
                if done <= 0:  # never seen on a file; a loop that cannot end must not be
                    raise OSError(errno.EIO, "the disk took no byte of a write")
                view, offset = view[done:], offset + done

    def truncate(self, size: int) -> None:
        with local(self.target, reading=False, direction="in"):
            self.handle.truncate(size)
