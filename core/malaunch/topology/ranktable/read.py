"""Reading a rank table that the platform may still be writing.

Producers write the file late and in place (ascend-operator: ``open(O_TRUNC)`` + write, no
rename), reset ``status`` to "initializing" on regeneration, and ModelArts mounts a directory
that the file appears in later. So a missing, empty, truncated or non-JSON file, or any status
but "completed", means "not ready yet": look again every poll interval until the deadline, and
trust a completed file only after two identical successive reads. There is no event to wait
for on a ConfigMap or shared-storage file, hence sleeping between reads.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, NamedTuple, Optional, Union

from malaunch.errors import MissingInputError, NotReadyError, TopologyError
from malaunch.files import NotAFile, TooLarge, read_regular
from malaunch.jsontext import JsonLongInteger, JsonTooDeep, loads
from malaunch.progress import Waiting
from malaunch.topology.ranktable.schema import MISSING, gc_paused, shown

DIRECTORY_FILES = ("jobstart_hccl.json", "hccl.json")
# 16,384 servers of 16 devices write about 30 MB; anything past this is not a rank table.
MAX_TABLE_BYTES = 256 << 20
MIN_POLL = 0.01  # never spin, whatever --wait-timeout and poll interval say


class Ready(NamedTuple):
    """A completed table: where it was read, its bytes and its JSON document."""

    path: Path
    raw: bytes
    data: Dict[str, Any]


class NotReady(NamedTuple):
    """Why the table cannot be used yet; ``kind`` is "missing", "malformed" or "status"."""

    kind: str
    reason: str


class Location(NamedTuple):
    """Where to look: a file, or (``directory_ok``) possibly a folder the file appears in."""

    path: Path
    origin: str  # "from RANK_TABLE_FILE", "the ModelArts default path", for messages
    directory_ok: bool = False


def _read(path: Path) -> Union[bytes, NotReady]:
    """The file's bytes, or why not yet; what waiting cannot mend is raised at once."""
    try:
        return read_regular(path, MAX_TABLE_BYTES)
    except FileNotFoundError:
        return NotReady("missing", "the file does not exist")
    except IsADirectoryError:
        return NotReady("missing", "it is a directory, not a rank table file")
    except PermissionError as exc:
        msg = f"rank table {path}: permission denied ({exc.strerror})"
        raise MissingInputError(msg) from exc
    except NotAFile as exc:
        msg = f"rank table {path}: {exc.strerror}"
        raise MissingInputError(msg) from exc
    except TooLarge as exc:
        msg = f"rank table {path}: {exc.strerror} (no real rank table is that large)"
        raise TopologyError(msg) from exc
    except OSError as exc:
        return NotReady("missing", f"cannot read it: {exc.strerror or exc}")


def read_once(path: Path) -> Union[Ready, NotReady]:
    """One look at the file: the document when its status is "completed", else why not.

    A completed table holding an integer past :data:`~malaunch.jsontext.MAX_INT_DIGITS`
    digits is whole JSON that waiting cannot mend: :class:`TopologyError` (65) naming its
    JSON path, at once.
    """
    raw = _read(path)
    if isinstance(raw, NotReady):
        return raw
    data = _parse(raw)
    if isinstance(data, NotReady):
        return data
    if isinstance(data, JsonLongInteger):
        # Whole JSON that waiting cannot mend once it says "completed" (a table still being
        # written may yet be replaced).
        document = data.document
        if isinstance(document, dict) and document.get("status") == "completed":
            raise TopologyError(f"rank table {path}: {data}")
        return NotReady("malformed", str(data))
    if type(data) is not dict:
        return NotReady("malformed", f"expected a JSON object, got a {type(data).__name__}")
    # Status first: the initial ConfigMap is only {"status": "initializing"}.
    status = data.get("status", MISSING)
    if status == "completed":
        return Ready(path, raw, data)
    return NotReady("status", _status_reason(status))


def _parse(raw: bytes) -> Union[Any, JsonLongInteger, NotReady]:
    """The document, a too-long integer (the caller decides by the table's status), or why
    the text is not a table yet."""
    if not raw.strip():
        return NotReady("malformed", "the file is empty")
    try:
        with gc_paused():
            return loads(raw)
    except JsonLongInteger as exc:
        return exc
    except JsonTooDeep:
        return NotReady("malformed", "not a rank table: JSON nested too deeply to read")
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8/16/32
        return NotReady("malformed", f"not valid JSON: {exc}")


def _status_reason(status: Any) -> str:
    if status is MISSING:
        return 'status is missing (expected "completed")'
    return f"status is {shown(status)}"


def _look(location: Location) -> Union[Ready, NotReady]:
    if location.directory_ok and location.path.is_dir():
        for name in DIRECTORY_FILES:
            candidate = location.path / name
            if candidate.exists():
                found = read_once(candidate)
                if isinstance(found, NotReady):  # the reason is the file's, not the folder's
                    return NotReady(found.kind, f"its {name}: {found.reason}")
                return found
        return NotReady("missing", f"no {' or '.join(DIRECTORY_FILES)} in this directory yet")
    return read_once(location.path)


def _same_bytes(path: Path, raw: bytes) -> bool:
    try:
        return read_regular(path, MAX_TABLE_BYTES) == raw
    except OSError:
        return False


def wait_ready(
    location: Location,
    timeout: float,
    poll_interval: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Ready:
    """Poll until the table is completed and stable, or raise :class:`NotReadyError`.

    ``timeout`` 0 means one attempt (plus the confirming read of a completed file).
    """
    poll = max(poll_interval, MIN_POLL)
    deadline = clock() + timeout
    reason: Optional[str] = None
    waiting = Waiting(f"rank table {location.path} ({location.origin})", clock=clock)
    try:
        while True:
            found = _look(location)
            if isinstance(found, Ready):
                sleep(poll)
                if _same_bytes(found.path, found.raw):
                    return found
                reason = "the file changed between two reads (still being written)"
            else:
                reason = found.reason
            remaining = deadline - clock()
            if remaining <= 0:
                msg = (
                    f"rank table {location.path} ({location.origin}) not ready after "
                    f"{timeout:g}s: {reason} (see --wait-timeout)"
                )
                raise NotReadyError(msg)
            waiting.update(reason, timeout)
            sleep(min(poll, remaining))
    finally:
        waiting.done()
