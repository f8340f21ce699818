"""Writing files so that a reader never sees half of one.

The summary, the converted rank table and the simulated platform's rank table are read by
other processes (a platform, HCCL, a node launcher polling for ``completed``) while they may
be written, so each is written to a temporary file in the same directory and renamed over the
target, which POSIX makes atomic.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import List, Optional, Union

from malaunch.errors import UsageError


def write_atomic(target: Union[str, Path], content: str) -> None:
    """Replace ``target`` with ``content`` (UTF-8) in one step; create its directory.

    On any error nothing is left behind: neither a partial target nor the temporary file.
    :raises OSError: the directory or the file cannot be written.
    """
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(temporary, 0o644)  # mkstemp makes 0600; readers may run as another user
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_pointer(path: Path, name: str) -> None:
    """Make ``path`` name ``name``, a sibling entry: a relative symlink, replaced in one step,
    or, on a filesystem without symlinks (some network and object-store mounts), a small file
    holding the name. :func:`read_pointer` reads either.

    :raises OSError: neither can be written (or ``path`` is a directory).
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    try:
        os.symlink(name, temporary)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            raise
        write_atomic(path, name + "\n")  # no symlinks here: the file form
        return
    try:
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


MAX_POINTER_BYTES = 4096


def read_pointer(path: Path) -> Optional[str]:
    """The name a pointer :func:`write_pointer` made holds (a symlink's target, or the file's
    one line); None when there is none, or it is neither (a directory, a FIFO, too long)."""
    try:
        return os.readlink(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # EINVAL: not a symlink, so maybe the file form
            return None
    try:
        raw = read_regular(path, MAX_POINTER_BYTES)
    except OSError:
        return None
    text = raw.decode("utf-8", errors="replace").strip()
    return text or None


class NotAFile(OSError):
    """The path names something that is not a regular file (a FIFO, a device, a socket)."""


class TooLarge(OSError):
    """The file is larger than the reader accepts."""


def read_regular(path: Union[str, Path], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, without ever blocking.

    The type and size are checked on the open descriptor before anything is read, so a FIFO
    (whose open would block until a writer comes), a device such as ``/dev/zero`` (endless) or
    a huge file is refused at once. The open is non-blocking for the same reason.

    :raises FileNotFoundError, IsADirectoryError, PermissionError: as ``open()`` would.
    :raises NotAFile: a FIFO, device or socket.
    :raises TooLarge: more than ``limit`` bytes.
    """
    fd = _open_regular(path)
    try:
        info = os.fstat(fd)
        if info.st_size > limit:
            raise TooLarge(errno.EFBIG, f"is {info.st_size} bytes, more than {limit}", str(path))
        chunks: List[bytes] = []
        total = 0
        while True:  # the file may grow while it is read (a writer at work): stop at the limit
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise TooLarge(errno.EFBIG, f"grew past {limit} bytes while read", str(path))
            chunks.append(chunk)
    finally:
        os.close(fd)


def read_head(path: Union[str, Path], size: int) -> bytes:
    """The first ``size`` bytes (or fewer) of a regular file, without ever blocking; raises
    as :func:`read_regular` does, but never :class:`TooLarge`."""
    fd = _open_regular(path)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def _open_regular(path: Union[str, Path]) -> int:
    """A descriptor of ``path`` opened non-blocking, refused unless a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        # A Unix socket (or a device without its driver) fails to open with ENXIO, "No such
        # device or address", which reads as a passing error: it is what it is for good.
        if exc.errno != errno.ENXIO:
            raise
        try:
            mode = os.stat(path).st_mode
        except OSError:
            raise exc from None
        kind = kind_of(mode)
        raise NotAFile(errno.EINVAL, f"is a {kind}, not a regular file", str(path)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise NotAFile(
                errno.EINVAL, f"is a {kind_of(info.st_mode)}, not a regular file", str(path)
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def output_path(target: Union[str, Path], name: str) -> Path:
    """Where to write a tool's output file ``target`` (``name`` is its option or argument,
    ``--html``, ``OUT``), checked before anything is written.

    :func:`write_atomic` renames a new file over its target: over ``/dev/full`` or a FIFO it
    would put a regular file in the device's place, over a symlink a file in the link's. So a
    symlink is followed (the file it points to is replaced, the link stays) and an existing
    directory, FIFO, device or socket is refused.

    :raises UsageError: ``target`` (or what it links to) exists and is not a regular file.
    """
    path = Path(target)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return path  # missing, or no such folder: writing says what is wrong, if anything
    if stat.S_ISLNK(mode):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:  # a dangling link: the file it names is created
            return Path(os.path.realpath(path))
        except OSError as exc:  # a loop of links: renaming over it would replace the link
            msg = f"{name} {path}: {exc.strerror or exc}"
            raise UsageError(msg) from exc
        path = Path(os.path.realpath(path))
    if stat.S_ISREG(mode):
        return path
    kind = "directory" if stat.S_ISDIR(mode) else kind_of(mode)
    msg = f"{name} {target}: is a {kind}, not a regular file (refusing to replace it)"
    raise UsageError(msg)


def check_directory(path: Path, create: bool) -> Optional[Path]:
    """That files can be created in the directory ``path``; ``create``: make it now. Returns
    the topmost folder this made (None when ``path`` existed or nothing was to be made).

    With ``create``, the directory and its parents are made and a probe file is created in it
    and removed (a folder may refuse new files whatever its mode says: ``/proc/self``, a
    read-only mount). Without (a dry run), nothing is created: ``path``, or the nearest of its
    parents that exists, must be a directory this process may write to, and the name one the
    system accepts.

    :raises OSError: why not (``FileExistsError`` for something else than a directory there).
    """
    if create:
        missing = [folder for folder in (path, *path.parents) if not os.path.lexists(folder)]
        made = missing[-1] if missing else None
        try:  # mkdir may fail partway down (a name too long): what it made goes again
            path.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".malaunch-probe.", dir=path)
        except OSError:
            if made is not None:
                remove_empty(path, made)
            raise
        os.close(fd)
        os.unlink(probe)
        return made
    current = path
    while True:
        try:
            mode = os.stat(current).st_mode
        except FileNotFoundError:
            if current.parent == current:
                raise
            current = current.parent  # to be created, with the folders above it
            continue
        if not stat.S_ISDIR(mode):
            raise FileExistsError(errno.EEXIST, "File exists", str(current))
        if not os.access(current, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "Permission denied", str(current))
        return None


def remove_empty(path: Path, top: Path) -> None:
    """Remove ``path`` and its parents up to ``top`` included, as long as they are empty
    (those that were never made are passed over)."""
    for folder in (path, *path.parents):
        if not os.path.lexists(folder):  # never made (or a name too long to be)
            continue
        try:
            folder.rmdir()
        except OSError:
            return
        if folder == top:
            return


def kind_of(mode: int) -> str:
    """What a file that is neither a regular file nor a directory is: ``FIFO``, ``device``..."""
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def path_safe(name: str, limit: int = 128) -> str:
    """``name`` as one harmless path component: letters, digits, ``.``, ``_`` and ``-`` only,
    never starting with a dot (so never ``..``), at most ``limit`` characters.

    Job ids come from the platform (``MA_VJ_NAME``, ``JOB_ID``) and end up in file names: a
    value such as ``../../../../escape/x`` must not put logs outside the log directory.
    """
    safe = _UNSAFE.sub("_", name)[:limit]
    if not safe:
        return "job"
    return "_" + safe[1:] if safe.startswith(".") else safe


def why_not_written(out: Path, exc: OSError) -> str:
    """Why ``out`` could not be written, in a few words: a file standing where one of its
    folders should be is named (mkdir says only "File exists")."""
    for folder in out.absolute().parents:
        if folder.exists():
            if not folder.is_dir():
                return f"{folder} is a file, not a directory"
            break
    return str(exc.strerror or exc)
