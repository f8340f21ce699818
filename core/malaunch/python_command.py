"""Reading a ``python ...`` command line the way the interpreter reads it.

Three places need to know whether a command runs Python and what it runs: the conda step
(which interpreter to swap), the mindspore plan (which script path to anchor when processes
run in per-device directories) and the torch_ddp delegate plan (what to hand torchrun). They
share this one reading of CPython's rules: the interpreter's options come first; ``-m MOD``
and ``-c CODE`` end them (what follows is the program's arguments); ``-`` is stdin; the first
other non-option is the script; ``--`` ends the options; one-letter flags combine (``-uB``);
``-W`` and ``-X`` take a value, attached (``-Werror``) or as the next argument.

And one mistake: a Python script given as the program (``train.py`` for ``python train.py``),
which the kernel cannot start (:func:`forgotten_python`).
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import shutil
from pathlib import Path
from typing import Optional, Sequence, Tuple

from malaunch import shell
from malaunch.files import read_head

# ``python``, ``python3``, ``python3.11``: what a user writes for an interpreter.
PYTHON_NAME = re.compile(r"python[0-9.]*")
_FLAGS_WITH_VALUE = frozenset("WX")
_LONG_OPTIONS_WITH_VALUE = frozenset({"--check-hash-based-pycs"})


class Target(enum.Enum):
    """What a python command runs."""

    SCRIPT = "script"
    MODULE = "module"  # ``-m pkg``: found on sys.path, whose first entry is the cwd
    CODE = "code"  # ``-c code``
    STDIN = "stdin"  # ``-`` (or nothing after the options)


@dataclasses.dataclass(frozen=True)
class PythonCommand:
    """A python command split the way the interpreter splits it.

    ``index`` is where the target starts in ``argv``: the script path, or the ``-m``/``-c``
    argument. ``module`` is the module of ``-m`` (None if missing); ``program_args`` are the
    arguments the script or module receives.
    """

    argv: Tuple[str, ...]
    target: Target
    index: int
    module: Optional[str] = None
    program_args: Tuple[str, ...] = ()


def is_python(program: str) -> bool:
    """``python``, ``python3``, ``python3.11`` or a path ending in one of them."""
    return PYTHON_NAME.fullmatch(os.path.basename(program)) is not None


def parse_python_command(command: Sequence[str]) -> Optional[PythonCommand]:
    """How ``command`` runs Python, or None when its program is not a python interpreter."""
    argv = tuple(command)
    if not argv or not is_python(argv[0]):
        return None
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return _script(argv, i + 1)
        if arg == "-":
            return PythonCommand(argv, Target.STDIN, i, program_args=argv[i + 1 :])
        if arg in _LONG_OPTIONS_WITH_VALUE:
            i += 2
            continue
        if not arg.startswith("-"):
            return _script(argv, i)
        if arg.startswith("--"):
            i += 1
            continue
        ended = _short_flags(argv, i)
        if isinstance(ended, PythonCommand):
            return ended
        i = ended
    return PythonCommand(argv, Target.STDIN, len(argv))


def _script(argv: Tuple[str, ...], index: int) -> PythonCommand:
    if index >= len(argv):
        return PythonCommand(argv, Target.STDIN, index)
    return PythonCommand(argv, Target.SCRIPT, index, program_args=argv[index + 1 :])


def _short_flags(argv: Tuple[str, ...], i: int) -> PythonCommand | int:
    """One argument of one-letter flags: the command if it ends the options, else the index
    of the next argument to read."""
    arg = argv[i]
    for pos, flag in enumerate(arg[1:], start=1):
        attached = arg[pos + 1 :]
        if flag == "m":
            if attached:
                return PythonCommand(argv, Target.MODULE, i, attached, argv[i + 1 :])
            module = argv[i + 1] if i + 1 < len(argv) else None
            return PythonCommand(argv, Target.MODULE, i, module, argv[i + 2 :])
        if flag == "c":
            return PythonCommand(argv, Target.CODE, i, program_args=argv[i + 2 :])
        if flag in _FLAGS_WITH_VALUE:
            # The value is the rest of this argument, or the next one.
            return i + 1 if attached else i + 2
    return i + 1


def forgotten_python(command: Sequence[str], cwd: str, path: Optional[str]) -> Optional[str]:
    """Why ``command``, whose program is a ``.py`` file of ``cwd``, cannot start as written,
    with the command that can (``did you mean `python train.py`?``); None when it can start or
    names no such file. The command suggested is quoted for a shell (:mod:`malaunch.shell`):
    pasted as it is, it runs that file and nothing else, whatever its name holds.

    A program without a ``/`` is looked up on ``path`` only (execvp), never in ``cwd``: there
    an executable script with a ``#!`` line wants ``./``, any other ``python``. With a ``/``,
    the file must be executable and start with ``#!``.
    """
    program = command[0] if command else ""
    if not program.endswith(".py"):
        return None
    file = Path(cwd, program)
    if "/" not in program:
        if shutil.which(program, path=path) is not None or not file.is_file():
            return None
        meant = ["./" + program] if _runs_itself(file) else ["python", program]
        return f"{program!r} is not a program on PATH: did you mean `{shell.command_line(meant)}`?"
    if not file.is_file() or _runs_itself(file):
        return None
    why = "is not executable" if not os.access(file, os.X_OK) else "has no #! line"
    return f"{program!r} {why}: did you mean `{shell.command_line(['python', program])}`?"


def _runs_itself(file: Path) -> bool:
    """An executable file starting with ``#!``: the kernel runs it with its interpreter."""
    if not os.access(file, os.X_OK):
        return False
    try:
        return read_head(file, 2) == b"#!"
    except OSError:
        return False
