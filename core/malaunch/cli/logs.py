"""``malaunch logs [DIR]...``: the rank logs of a run, merged in arrival order (docs/logs.md).

The command parses, calls :mod:`malaunch.logs` and writes to stdout. It owns what the core
must not: the default directory (from the environment), what a stopping signal, raised
whatever the command is doing (:mod:`malaunch.stopping`), ends it with (``--follow``: exit 0;
a read: 128 + N) and a reader of stdout that went away (``| head``: exit 0, quietly).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Tuple

import click

from malaunch import console
from malaunch.cli.command import Command
from malaunch.cli.options import Checked
from malaunch.errors import ExitCode
from malaunch.log import logger
from malaunch.logs.discover import missing_run, require_runs
from malaunch.logs.follow import Output, follow, read_once
from malaunch.logs.merge import LogSet
from malaunch.logs.select import SINCE_HELP, Selection, compile_grep, parse_since
from malaunch.params import Path as ParamPath
from malaunch.params import Text
from malaunch.rankspec import parse_rank_spec
from malaunch.stopping import Stopped, raising_on_stop_signals
from malaunch.supervisor.runs import pick_run


def default_log_dir(environ: Mapping[str, str]) -> Path:
    """Where the launcher writes its logs when not told: ``--log-dir``'s variable, else the
    platform's ``MA_LOG_DIR``, else ``./malaunch-logs``."""
    return Path(environ.get("MALAUNCH_LOG_DIR") or environ.get("MA_LOG_DIR") or "malaunch-logs")


def silence_stdout() -> None:
    """The reader went away: point stdout at /dev/null, so that flushing what Python may
    still hold at exit cannot fail again."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


class Pattern(Text):
    """``--grep``'s value: not empty, and a pattern RE2 runs. Checked while click parses, so
    that an error names ``MALAUNCH_LOGS_GREP`` when the value came from there."""

    name = "regex"

    def convert(
        self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]
    ) -> str:
        text = super().convert(value, param, ctx)
        return Checked(self.name, compile_grep).convert(text, param, ctx)


def parse_filters(
    ranks: str, nodes: str, grep: Optional[str], since: Optional[str], raw: bool = False
) -> Selection:
    return Selection(
        ranks=parse_rank_spec(ranks, "--ranks"),
        nodes=parse_rank_spec(nodes, "--nodes"),
        grep=compile_grep(grep) if grep is not None else None,
        since=parse_since(since, time.time()) if since is not None else None,
        raw=raw,
    )


@click.command("logs", cls=Command)
@click.argument("dirs", nargs=-1, metavar="[DIR]...", type=ParamPath(path_type=Path))
@click.option(
    "--ranks",
    type=Text(),
    default="all",
    show_default=True,
    metavar="SPEC",
    help="Ranks to show: all, or ranks like 0,3-5 (a ps or scheduler has no rank).",
)
@click.option(
    "--nodes",
    type=Text(),
    default="all",
    show_default=True,
    metavar="SPEC",
    help="Nodes to show: all, or node ranks like 0,2-3.",
)
@click.option(
    "--grep",
    type=Pattern(),
    metavar="REGEX",
    help="Only lines this regular expression finds (RE2 syntax, linear time: Python's, without "
    "backreferences or lookaround).",
)
@click.option(
    "--since", type=Text(), metavar="WHEN", help=f"Only lines that arrived since: {SINCE_HELP}."
)
@click.option("-f", "--follow", "following", envvar="MALAUNCH_LOGS_FOLLOW", is_flag=True,
              help="Then print new lines as they come (new files, nodes and attempts too; a "
              "log dir's newer run once it starts), until Ctrl-C or SIGTERM (exit 0).")  # fmt: skip
@click.option("--run", "run_name", envvar="MALAUNCH_LOGS_RUN", type=Text(), metavar="NAME",
              help="Read run NAME (a run-... folder) of each log dir, not the latest.")  # fmt: skip
@click.option("--raw", is_flag=True,
              help="Print the lines as the logs hold them; by default terminal controls other "
              "than colour (title, clipboard, cursor moves, C1) show as text like \\x1b, on a "
              "terminal or not, and a carriage return repeats the prefix.")  # fmt: skip
def logs_command(  # noqa: PLR0917 (click passes each option as a parameter)
    dirs: Tuple[Path, ...],
    ranks: str,
    nodes: str,
    grep: Optional[str],
    since: Optional[str],
    following: bool,
    run_name: Optional[str],
    raw: bool,
) -> int:
    """Print a run's rank logs merged in arrival order, each line prefixed [node K rank R].

    DIR is a log dir (its latest run is read, named on stderr), a run folder in it, a
    `malaunch simulate` log dir or run, or a folder of node log dirs; several may be given.
    Default: $MALAUNCH_LOG_DIR, else $MA_LOG_DIR, else ./malaunch-logs.
    """
    selection = parse_filters(ranks, nodes, grep, since, raw)
    roots = list(dirs) or [default_log_dir(os.environ)]
    if run_name is not None:
        roots = [pick_run(root, run_name) for root in roots]
    if following:
        # `malaunch logs -f` is often started before the job writes its first line: wait for
        # the run (directories are looked for again every second) instead of refusing.
        require_runs([root for root in roots if root.exists() and not root.is_dir()])
        for root in roots:
            if missing_run(root) is not None:
                logger.info(f"waiting for a run in {root}: nothing there yet")
    else:
        require_runs(roots)
    logs = LogSet(roots, selection)
    code = int(ExitCode.OK)
    try:
        with raising_on_stop_signals() as should_stop:
            print_logs(logs, following, should_stop)
    except Stopped as stop:  # following ends so (exit 0); a read is cut short (128 + N)
        console.finish(0)  # what a stalled reader has not taken is given up
        code = int(ExitCode.OK) if following else ExitCode.for_signal(stop.signum)
    finally:
        logs.close()  # the default handlers again: a signal here ends the command as usual
    return code


def print_logs(logs: LogSet, following: bool, should_stop: Callable[[], bool]) -> None:
    """Every line there is (and, following, each new one) to stdout."""
    out = Output(console.stdout(), should_stop)
    try:
        if following:
            follow(logs, out.write, out.flush, should_stop)
        else:
            read_once(logs, out.write)
            out.flush()
    except BrokenPipeError:  # `malaunch logs | head`: the reader has all it wanted
        silence_stdout()
