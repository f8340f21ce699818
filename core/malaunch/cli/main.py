"""The ``malaunch`` console script: dispatch, logging set-up and the one error boundary.

This package (``malaunch.cli``) is the only one that takes configuration from ``os.environ`` and
``sys.argv``, configures loguru sinks or exits; the core below it takes explicit mappings and
options. The first word picks the command: a tool command (:mod:`malaunch.cli.tools`), else
the launch command (:mod:`malaunch.cli.launch`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import sys
import traceback
from typing import Any, List, Optional, Sequence, Set

import click

from malaunch import __version__, console, log
from malaunch.cli.command import envvar_name
from malaunch.cli.envvars import option_variables, warn_about_variables
from malaunch.cli.launch import build_launch_command
from malaunch.errors import ExitCode, MalaunchError, UsageError
from malaunch.plugins import load_plugins
from malaunch.stopping import Stopped, raise_on_stop_signals, stop_line
from malaunch.wording import closest, did_you_mean

# click 8.2+ only: what `malaunch ranktable` without a subcommand raises.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())
TOOL_COMMANDS = ("plugins", "topology", "ranktable", "simulate", "logs", "report", "render")


def setup_logging(debug: bool) -> None:
    """The launcher's own messages: one stderr sink, prefixed so they stand out from workers.

    The sink is installed when the first message is printed (see malaunch.log). It writes
    through stderr's console stream (:mod:`malaunch.console`), never blocking on a stalled
    reader: a message waits there, and is dropped only past the stream's reserve."""
    level = "DEBUG" if debug else "INFO"

    def configure(real_logger: Any) -> None:
        real_logger.remove()
        # A format *string* cannot call .lower(); loguru accepts a function returning one.
        real_logger.add(_to_stderr, level=level, format=_log_format)

    log.set_up(level, configure)


def _to_stderr(message: str) -> None:
    console.stderr().write(str(message).encode("utf-8", "backslashreplace"), keep=True)


def _log_format(record: Any) -> str:
    # One line per message: a value that slipped into a message unescaped cannot add a line
    # or a terminal escape (malaunch.log.escape_controls).
    record["extra"]["one_line"] = log.escape_controls(record["message"])
    return f"malaunch: {record['level'].name.lower()}: {{extra[one_line]}}\n{{exception}}"


def _wants_debug(args: Sequence[str]) -> bool:
    """``--debug`` or ``MALAUNCH_DEBUG``, read before click parses (the error boundary needs
    it first). The variable is read as click reads it: ``no`` and ``off`` are false, and a value
    click refuses is false here too, so that its one-line refusal comes without a traceback."""
    head = args[: args.index("--")] if "--" in args else args
    if "--debug" in head:
        return True
    value = os.environ.get("MALAUNCH_DEBUG", "")
    try:
        return bool(value) and bool(click.BOOL.convert(value, None, None))
    except click.BadParameter:
        return False


def _run(args: List[str]) -> int:
    if args and args[0] == "--version":
        click.echo(f"malaunch {__version__}")
        return ExitCode.OK
    if args and args[0] not in TOOL_COMMANDS:
        _refuse_a_mistyped_command(args[0])
    command: click.Command
    if args and args[0] in TOOL_COMMANDS:
        from malaunch.cli.tools import tools  # noqa: PLC0415 (keep the launch path light)

        command = tools
    else:
        command = build_launch_command(load_plugins(os.environ))
    warn_about_variables(os.environ, option_variables(command), _every_option_variable)
    try:
        result = command.main(args, prog_name="malaunch", standalone_mode=False)
    except SystemExit as exc:
        # click's one sys.exit outside standalone mode: stdout's reader went away (EPIPE,
        # `malaunch plugins | head -c1`), which it ends with 1, a worker's code. Quietly with
        # 0 instead, as `malaunch logs | head` ends (docs/logs.md): the reader took what it
        # wanted. Any other exit keeps its code.
        if _reader_gone(exc):
            return ExitCode.OK
        raise
    except NO_ARGS_IS_HELP as exc:
        # click 8.2+: `malaunch ranktable` alone is an error whose message is the whole help;
        # it is shown as help, as click 8.1 does.
        click.echo(exc.format_message())
        return ExitCode.OK
    return int(result) if isinstance(result, int) else ExitCode.OK


def _reader_gone(exc: SystemExit) -> bool:
    """click's exit for EPIPE: click 8.1 raises it inside its ``except OSError``; 8.2+ after
    it, once it has wrapped stdout in its ``_PacifyFlushWrapper`` (done for EPIPE alone)."""
    cause = exc.__context__
    if isinstance(cause, OSError) and cause.errno == errno.EPIPE:
        return True
    return exc.code == 1 and "PacifyFlushWrapper" in type(sys.stdout).__name__


def _every_option_variable() -> Set[str]:
    """The ``MALAUNCH_*`` twins of every command's options (imports every command)."""
    from malaunch.cli import render, simulate  # noqa: PLC0415 (only for a stray variable)
    from malaunch.cli.tools import tools  # noqa: PLC0415 (only for a stray variable)

    commands = [
        build_launch_command(load_plugins(os.environ)),
        tools,
        simulate.build_command(os.environ),
        render.build_command(os.environ),
    ]
    return {name for command in commands for name in option_variables(command)}


def _refuse_a_mistyped_command(word: str) -> None:
    """``malaunch topologyy`` is a typo of a command, not a job to launch: with
    ``MALAUNCH_FRAMEWORK`` set it would otherwise run ``topologyy`` as the job's program. A
    program of that name on PATH is a job's program."""
    if word.startswith("-") or "/" in word:
        return
    meant = closest(word, TOOL_COMMANDS)
    if meant is not None and shutil.which(word) is None:
        msg = (
            f"unknown command {word!r}: did you mean `malaunch {meant}`? (a job's own "
            "command goes after the options and --)"
        )
        raise UsageError(msg)


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line and return the exit code (SPEC §3).

    The one error boundary: a :class:`MalaunchError` is one ``malaunch: error:`` line with its
    own code; click's errors are one line naming the option (or its ``MALAUNCH_`` variable when
    the value came from there), exit 64; anything else is a bug: one line, exit 70. ``--debug``
    adds the traceback. The launcher itself never exits 1, which a platform could not tell
    from a worker's exit 1.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    reopen_closed_standard_streams()
    debug = _wants_debug(args)
    setup_logging(debug)
    try:
        return _run(args)
    except MalaunchError as exc:
        # A newline in the launcher's own message comes from a value (a path, a variable):
        # shown as \n, so that "a<newline>b" does not read as "a b".
        return _fail(log.escape_controls(str(exc)), int(exc.exit_code), debug)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except (click.exceptions.Abort, Stopped) as exc:  # Abort: click's word for Ctrl-C
        return stopped(exc.signum if isinstance(exc, Stopped) else int(signal.SIGINT))
    except click.ClickException as exc:
        return _fail(click_message(exc), int(ExitCode.USAGE), debug)
    except Exception as exc:  # the boundary: a bug is exit 70, never a traceback
        what = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        hint = "the traceback is above" if debug else "rerun with --debug for the traceback"
        message = f"internal error ({what}); {hint}"
        return _fail(message, int(ExitCode.SOFTWARE), debug)
    finally:
        # What a stalled console reader has not taken yet (the summary) gets a short grace.
        console.finish(console.EXIT_GRACE)


def stopped(signum: int) -> int:
    """A stopping signal ended the command before (or without) a supervisor: one line, 128+N,
    and what a stalled reader has not taken yet is given up."""
    console.stderr().write(stop_line(signum).encode(), keep=True)
    console.finish(0)
    return ExitCode.for_signal(signum)


def reopen_closed_standard_streams() -> None:
    """Give a closed stdin, stdout or stderr (``malaunch ... >&-``) ``/dev/null``.

    A closed descriptor 0, 1 or 2 is the next one ``open()`` returns: the console would then
    write into whatever file took it (a rank's log, the summary), and Python's ``sys.stdout``
    is None, which ``print`` and ``flush`` do not survive. A closed stream reads as end of file
    and takes every write, as the shell's ``>/dev/null`` does; the exit code is the job's.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        if getattr(sys, name) is None:
            # A stream for the life of the process, never closed: no with-block.
            stream = open(fd, mode, encoding="utf-8", closefd=False)  # noqa: SIM115 (see above)
            setattr(sys, name, stream)


def _fail(message: str, code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    line = f"malaunch: error: {log.escape_controls(_one_line(message))}\n"
    console.stderr().write(line.encode("utf-8", "backslashreplace"), keep=True)
    return code


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


BOOL_REFUSAL = " is not a valid boolean"
BOOL_WORDS = "1, 0, true, false, yes, no, on, off"


def click_message(exc: click.ClickException) -> str:
    """click's error as one line, naming the option or the ``MALAUNCH_`` variable at fault."""
    if isinstance(exc, click.MissingParameter) and exc.param is not None:
        # click leaves its message empty here and builds the text in format_message
        return f"{_culprit(exc.param, exc.ctx)} is required"
    if isinstance(exc, click.BadParameter) and exc.param is not None:
        culprit = _culprit(exc.param, exc.ctx)
        if isinstance(exc.param.type, click.types.BoolParamType) and BOOL_REFUSAL in exc.message:
            # click 8.1 lists no accepted values and 8.2 lists them with an empty one first:
            # one wording on every supported click.
            value = exc.message[: exc.message.index(BOOL_REFUSAL)]
            return f"{culprit}: {value}{BOOL_REFUSAL}; use one of {BOOL_WORDS}"
        for flag in exc.param.opts:
            # The launcher's own parsers name the option first (malaunch.cli.options.Checked).
            if exc.message.startswith((f"{flag} ", f"{flag}:")):
                return culprit + exc.message[len(flag) :]
        return f"{culprit}: {exc.message}"
    if isinstance(exc, click.NoSuchOption):
        # click's own suggestions are up to three, and odd (--framwork: "--framework,
        # --num-workers"): the one closest name, or none.
        command = exc.ctx.command if exc.ctx is not None else None
        names = [
            flag
            for param in (command.params if command is not None else ())
            for flag in (*param.opts, *param.secondary_opts)
            if flag.startswith("-")
        ]
        where = exc.ctx.command_path if exc.ctx is not None else "malaunch"
        hint = did_you_mean(exc.option_name, names)
        return f"no such option: {exc.option_name}{hint}; see `{where} --help`"
    return exc.format_message()


def _culprit(param: click.Parameter, ctx: Optional[click.Context]) -> str:
    name = param.name or ""
    source = ctx.get_parameter_source(name) if ctx is not None and name else None
    if source is click.core.ParameterSource.ENVIRONMENT:
        return envvar_name(param, ctx)
    flags = [flag for flag in param.opts if flag.startswith("--")]
    return flags[0] if flags else (param.human_readable_name or name)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Run the command line and exit with its code (``python -m malaunch``)."""
    raise_on_stop_signals()
    try:
        code = run(argv)
    except Stopped as exc:
        code = ExitCode.for_signal(exc.signum)
    sys.exit(code)


def console_main() -> None:
    """The ``malaunch`` console script: like :func:`main`, minus the interpreter's teardown.

    Tearing down pydantic's, click's and the plugins' modules costs 40-70 ms of CPU on every
    run, and a platform waits for it after the last worker has already exited. By now every
    log, summary and rank table is written and closed, so only the standard streams need a
    flush.
    """
    raise_on_stop_signals()  # again: as installed by malaunch.cli.entry, for other callers
    try:
        code = run()
    except Stopped as exc:  # in the last moments of run(): its code stands for the signal
        code = ExitCode.for_signal(exc.signum)
    for stream in (sys.stdout, sys.stderr):
        # A reader that went away, or a closed stream, must not turn the code into a crash.
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code)
