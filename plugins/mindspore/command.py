"""Keeping a relative script path working when a process runs in another directory.

Rank-table mode runs every process in its own ``device<i>`` directory (as ModelArts' own
bootstrap does), so ``python train.py`` started there would not find ``train.py``. Only the
script path is rewritten: other arguments are the script's business.
"""

from __future__ import annotations

import enum
import os
import re
from pathlib import Path
from typing import List, Sequence, Tuple

_PYTHON_NAME = re.compile(r"python[0-9.]*")
# Interpreter options that take a value (``-W error``, ``-X dev`` or ``-Werror``).
_OPTIONS_WITH_VALUE = frozenset("WX")
_LONG_OPTIONS_WITH_VALUE = frozenset({"--check-hash-based-pycs"})


class Target(enum.Enum):
    """What a ``python`` command runs."""

    SCRIPT = "script"
    MODULE = "module"  # ``-m pkg``: found on sys.path, whose first entry is the cwd
    OTHER = "other"  # ``-c code``, stdin, or not a python command


def is_python(program: str) -> bool:
    """``python``, ``python3``, ``python3.11`` or a path ending in one of them."""
    return _PYTHON_NAME.fullmatch(os.path.basename(program)) is not None


def _script_position(argv: Sequence[str]) -> Tuple[int, Target]:
    """Index of the script argument after the interpreter's own options, and what it is."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return i + 1, Target.SCRIPT
        if arg in _LONG_OPTIONS_WITH_VALUE:
            i += 2
            continue
        if not arg.startswith("-") or arg == "-":
            return i, (Target.SCRIPT if arg != "-" else Target.OTHER)
        if arg.startswith("--"):
            i += 1
            continue
        for pos, flag in enumerate(arg[1:], start=1):
            if flag == "m":
                return i, Target.MODULE
            if flag == "c":
                return i, Target.OTHER
            if flag in _OPTIONS_WITH_VALUE:
                # The value is the rest of this argument, or the next one.
                i += 1 if pos < len(arg) - 1 else 2
                break
        else:
            i += 1
    return len(argv), Target.OTHER


def _anchored(path: str, base: Path) -> str:
    if os.path.isabs(path) or not (base / path).is_file():
        return path
    return str(base / path)


def anchor_command(command: Sequence[str], base: Path) -> Tuple[List[str], Target]:
    """Rewrite relative paths of the program and of a python script to absolute ones.

    ``base`` is the launcher's working directory. The program (``./run.sh``) is rewritten
    when it contains a ``/``; for a python command, the script argument right after the
    interpreter's options is rewritten. Only paths of files that exist under ``base`` are
    touched, so ``python -m pkg`` or a bare ``python`` found on ``PATH`` stay as they are.
    """
    argv = list(command)
    if not argv:
        return argv, Target.OTHER
    if "/" in argv[0]:
        argv[0] = _anchored(argv[0], base)
    if not is_python(argv[0]):
        return argv, Target.OTHER
    index, target = _script_position(argv)
    if target is Target.SCRIPT and index < len(argv):
        argv[index] = _anchored(argv[index], base)
    return argv, target


def prepend_path(entry: str, current: str) -> str:
    """``entry`` first on a ``PATH``-style list."""
    return f"{entry}{os.pathsep}{current}" if current else entry
