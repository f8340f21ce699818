"""Writing files so that a reader never sees half of one.

The summary, the converted rank table and the simulated platform's rank table are read by
other processes (a platform, HCCL, a node launcher polling for ``completed``) while they may
be written, so each is written to a temporary file in the same directory and renamed over the
target, which POSIX makes atomic.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Union


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
