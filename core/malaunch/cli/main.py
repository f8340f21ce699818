"""The ``malaunch`` console script: dispatch, logging set-up and the one error boundary.

This package (``malaunch.cli``) is the only one that takes configuration from ``os.environ`` and
``sys.argv``, configures loguru sinks or exits; the core below it takes explicit mappings and
options. The first word picks the command: a tool command (:mod:`malaunch.cli.tools`), else
the launch command (:mod:`malaunch.cli.launch`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from typing import Any, List, Optional, Sequence

import click

from malaunch import __version__, log
from malaunch.cli.launch import build_launch_command
from malaunch.errors import ExitCode, MalaunchError
from malaunch.plugins import load_plugins

TOOL_COMMANDS = ("plugins", "topology", "ranktable", "simulate")


def setup_logging(debug: bool) -> None:
    """The launcher's own messages: one stderr sink, prefixed so they stand out from workers.

    The sink is installed when the first message is printed (see malaunch.log)."""
    level = "DEBUG" if debug else "INFO"

    def configure(real_logger: Any) -> None:
        real_logger.remove()
        # A format *string* cannot call .lower(); loguru accepts a function returning one.
        real_logger.add(sys.stderr, level=level, format=_log_format)

    log.set_up(level, configure)


def _log_format(record: Any) -> str:
    return f"malaunch: {record['level'].name.lower()}: {{message}}\n{{exception}}"


def _wants_debug(args: Sequence[str]) -> bool:
    head = args[: args.index("--")] if "--" in args else args
    return "--debug" in head or os.environ.get("MALAUNCH_DEBUG", "") not in ("", "0", "false")


def _run(args: List[str]) -> int:
    if args and args[0] == "--version":
        click.echo(f"malaunch {__version__}")
        return ExitCode.OK
    if args and args[0] in TOOL_COMMANDS:
        from malaunch.cli.tools import tools  # noqa: PLC0415 (keep the launch path light)

        result = tools.main(args, prog_name="malaunch", standalone_mode=False)
    else:
        plugins = load_plugins(os.environ)
        command = build_launch_command(plugins)
        result = command.main(args, prog_name="malaunch", standalone_mode=False)
    return int(result) if isinstance(result, int) else ExitCode.OK


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line and return the exit code (SPEC §3)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = _wants_debug(args)
    setup_logging(debug)
    try:
        return _run(args)
    except MalaunchError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"malaunch: error: {exc}", err=True)
        return int(exc.exit_code)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        return ExitCode.for_signal(2)
    except click.ClickException as exc:
        exc.show()
        return int(ExitCode.USAGE)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Run the command line and exit with its code (``python -m malaunch``)."""
    sys.exit(run(argv))


def console_main() -> None:
    """The ``malaunch`` console script: like :func:`main`, minus the interpreter's teardown.

    Tearing down pydantic's, click's and the plugins' modules costs 40-70 ms of CPU on every
    run, and a platform waits for it after the last worker has already exited. By now every
    log, summary and rank table is written and closed, so only the standard streams need a
    flush.
    """
    code = run()
    for stream in (sys.stdout, sys.stderr):
        # A reader that went away, or a closed stream, must not turn the code into a crash.
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code)
