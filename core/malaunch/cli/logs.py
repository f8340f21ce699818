"""``malaunch logs [DIR]...``: the rank logs of a run, merged in arrival order (docs/logs.md).

The command parses, calls :mod:`malaunch.logs` and writes to stdout. It owns what the core
must not: the default directory (from the environment), the signal handlers that end the
command whatever it is doing (``--follow``: exit 0; a read: 128 + N) and a reader of stdout
that went away (``| head``: exit 0, quietly).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Mapping, Optional, Tuple

import click

from malaunch.cli.options import Checked
from malaunch.errors import ExitCode
from malaunch.log import logger
from malaunch.logs.discover import missing_run, require_runs
from malaunch.logs.follow import follow, read_once
from malaunch.logs.merge import LogSet
from malaunch.logs.select import SINCE_HELP, Selection, compile_grep, parse_since
from malaunch.rankspec import parse_rank_spec


def default_log_dir(environ: Mapping[str, str]) -> Path:
    """Where the launcher writes its logs when not told: ``--log-dir``'s variable, else the
    platform's ``MA_LOG_DIR``, else ``./malaunch-logs``."""
    return Path(environ.get("MALAUNCH_LOG_DIR") or environ.get("MA_LOG_DIR") or "malaunch-logs")


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived: raised from the handler, so that it ends whatever the command
    is doing (a read, a search, a write to a reader that stalled). A BaseException, as
    KeyboardInterrupt is, so that no ``except Exception`` on the way holds it up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Callable[[], bool]]:
    """SIGINT (Ctrl-C) and SIGTERM raise :class:`Stopped`, once; ``should_stop()`` is then true.

    The handler raises rather than only noting the signal: a note is read between two blocks,
    and a write blocked on a stalled reader (a paused terminal, a full pipe) would never get
    there, since Python retries it after the handler returns.
    """
    arrived: List[int] = []

    def stop(signum: int, _frame: Any) -> None:
        first = not arrived
        arrived.append(signum)
        if first:
            raise Stopped(signum)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield lambda: bool(arrived)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class Stdout:
    """UTF-8 bytes to stdout, whatever the locale: the logs were decoded with replacement
    characters, which an ASCII locale could not encode."""

    def __init__(self) -> None:
        self.stream = sys.stdout.buffer

    def write(self, text: str) -> None:
        self.stream.write(text.encode("utf-8"))

    def flush(self) -> None:
        self.stream.flush()

    def end_stopped(self) -> None:
        """After a stop: what is still buffered goes to a regular file, which cannot block; it
        is dropped for a pipe or a terminal, whose reader may have stalled and would keep the
        stopped command waiting."""
        with contextlib.suppress(OSError, ValueError):
            if stat.S_ISREG(os.fstat(self.stream.fileno()).st_mode):
                self.stream.flush()
                return
        self.silence()

    def silence(self) -> None:
        """The reader went away: point stdout at /dev/null, so that flushing what is still
        buffered at exit cannot fail again."""
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


def parse_filters(ranks: str, nodes: str, grep: Optional[str], since: Optional[str]) -> Selection:
    return Selection(
        ranks=parse_rank_spec(ranks, "--ranks"),
        nodes=parse_rank_spec(nodes, "--nodes"),
        grep=compile_grep(grep) if grep is not None else None,
        since=parse_since(since, time.time()) if since is not None else None,
    )


@click.command("logs")
@click.argument("dirs", nargs=-1, metavar="[DIR]...", type=click.Path(path_type=Path))
@click.option(
    "--ranks",
    default="all",
    show_default=True,
    metavar="SPEC",
    help="Ranks to show: all, or ranks like 0,3-5 (a ps or scheduler has no rank).",
)
@click.option(
    "--nodes",
    default="all",
    show_default=True,
    metavar="SPEC",
    help="Nodes to show: all, or node ranks like 0,2-3.",
)
@click.option(
    "--grep",
    metavar="REGEX",
    # Checked while click parses, so that an error names MALAUNCH_LOGS_GREP when it came
    # from there.
    type=Checked("pattern", compile_grep),
    help="Only lines this regular expression finds (RE2 syntax, linear time: Python's, without "
    "backreferences or lookaround).",
)
@click.option("--since", metavar="WHEN", help=f"Only lines that arrived since: {SINCE_HELP}.")
@click.option("-f", "--follow", "following", is_flag=True,
              help="Then print new lines as they come (new files, nodes and attempts too), "
              "until Ctrl-C or SIGTERM (exit 0).")  # fmt: skip
def logs_command(  # noqa: PLR0917 (click passes each option as a parameter)
    dirs: Tuple[Path, ...],
    ranks: str,
    nodes: str,
    grep: Optional[str],
    since: Optional[str],
    following: bool,
) -> int:
    """Print a run's rank logs merged in arrival order, each line prefixed [node K rank R].

    DIR is a log dir, a `malaunch simulate` dir, or a folder of node log dirs; several may be
    given. Default: $MALAUNCH_LOG_DIR, else $MA_LOG_DIR, else ./malaunch-logs.
    """
    selection = parse_filters(ranks, nodes, grep, since)
    roots = list(dirs) or [default_log_dir(os.environ)]
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
    out = Stdout()
    code = int(ExitCode.OK)
    try:
        with stop_on_signals() as should_stop:
            print_logs(logs, out, following, should_stop)
    except Stopped as stop:  # following ends so (exit 0); a read is cut short (128 + N)
        out.end_stopped()
        code = int(ExitCode.OK) if following else ExitCode.for_signal(stop.signum)
    finally:
        logs.close()  # the default handlers again: a signal here ends the command as usual
    return code


def print_logs(logs: LogSet, out: Stdout, following: bool, should_stop: Callable[[], bool]) -> None:
    """Every line there is (and, following, each new one) to ``out``."""
    try:
        if following:
            follow(logs, out.write, out.flush, should_stop)
        else:
            read_once(logs, out.write)
        out.flush()
    except BrokenPipeError:  # `malaunch logs | head`: the reader has all it wanted
        out.silence()
