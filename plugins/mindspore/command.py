"""Keeping a relative script path working when a process runs in another directory.

Rank-table mode runs every process in its own ``device<i>`` directory (as ModelArts' own
bootstrap does), so ``python train.py`` started there would not find ``train.py``. Only the
script path is rewritten: other arguments are the script's business.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from malaunch.api import Target, parse_python_command


def _anchored(path: str, base: Path) -> str:
    if os.path.isabs(path) or not (base / path).is_file():
        return path
    return str(base / path)


def anchor_command(command: Sequence[str], base: Path) -> Tuple[List[str], Optional[Target]]:
    """Rewrite relative paths of the program and of a python script to absolute ones.

    ``base`` is the launcher's working directory. The program (``./run.sh``) is rewritten
    when it contains a ``/``; for a python command, the script argument right after the
    interpreter's options is rewritten. Returns the argv and what a python command runs (None
    for other programs). Only paths of files that exist under ``base`` are
    touched, so ``python -m pkg`` or a bare ``python`` found on ``PATH`` stay as they are.
    """
    argv = list(command)
    if argv and "/" in argv[0]:
        argv[0] = _anchored(argv[0], base)
    parsed = parse_python_command(argv)
    if parsed is None:
        return argv, None
    if parsed.target is Target.SCRIPT:
        argv[parsed.index] = _anchored(argv[parsed.index], base)
    return argv, parsed.target


def prepend_path(entry: str, current: str) -> str:
    """``entry`` first on a ``PATH``-style list."""
    return f"{entry}{os.pathsep}{current}" if current else entry
