"""The end of a failed rank's log: its last lines and the Python exception it died of.

Read when the failure is seen (the launcher first copies what the dead process left in its
pipe), so the summary on every node can show why the job died without anyone opening a file.
"""

from __future__ import annotations

import os
from typing import Callable, List, Optional, Tuple

from malaunch.models import ProcessSpec

TAIL_BYTES = 64 * 1024
MAX_LINE = 400  # characters kept of one line: a progress bar must not fill the summary
MAX_EXCEPTION_LINES = 200
TRACEBACK = "Traceback (most recent call last):"


# (its last lines, its Python exception, the file they are from) of a failed process
Tail = Tuple[List[str], Optional[str], str]
TailReader = Callable[[ProcessSpec, int], Tail]


def own_log(spec: ProcessSpec, count: int) -> Tail:
    """A failed process's tail, read from its own log file (the default)."""
    lines, exception = log_tail(spec.log_file, count)
    return lines, exception, spec.log_file


def log_tail(path: str, count: int) -> Tuple[List[str], Optional[str]]:
    """The last ``count`` lines of the log, and its last Python traceback (None if none)."""
    if count <= 0:
        return [], None
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - TAIL_BYTES))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return [], None
    lines = [line[:MAX_LINE] for line in text.splitlines()]
    return lines[-count:], _exception(lines)


def _exception(lines: List[str]) -> Optional[str]:
    """The last traceback, with the exceptions chained before it, to the end of the log (a
    process that died of it printed nothing after it)."""
    starts = [i for i, line in enumerate(lines) if line.startswith(TRACEBACK)]
    if not starts:
        return None
    start = starts[-1]
    for earlier in reversed(starts[:-1]):
        # "During handling of the above exception, another exception occurred:" (or "The
        # above exception was the direct cause of the following exception:") chains them.
        joining = lines[max(earlier, start - 3) : start]
        if not any(line.rstrip().endswith("exception:") for line in joining):
            break
        start = earlier
    return "\n".join(lines[start:][:MAX_EXCEPTION_LINES])
