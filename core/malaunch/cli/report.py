"""``malaunch report [DIR] --html OUT``: one self-contained HTML page of a run.

The command only parses and renders; the work is :mod:`malaunch.report`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import click

from malaunch.cli.command import Command
from malaunch.cli.logs import default_log_dir
from malaunch.errors import UsageError
from malaunch.params import Path as ParamPath
from malaunch.params import Text
from malaunch.supervisor.runs import pick_run
from malaunch.wording import plural


@click.command("report", cls=Command)
@click.argument("directory", metavar="[DIR]", required=False, type=ParamPath(path_type=Path))
@click.option(
    "--html",
    "out",
    envvar="MALAUNCH_REPORT_HTML",  # named after the option, as every twin
    metavar="OUT",
    type=ParamPath(readable=False, path_type=Path),  # written, never read
    help="Write the page to OUT (one file: inline CSS and SVG, nothing fetched).  [required]",
)
@click.option(
    "--run",
    "run_name",
    envvar="MALAUNCH_REPORT_RUN",  # named after the option, as every twin
    type=Text(),
    metavar="NAME",
    help="Report the run NAME (a run-... folder) of the log dir, not the latest.",
)
def report_command(directory: Optional[Path], out: Optional[Path], run_name: Optional[str]) -> None:
    """Write one HTML page of the run in DIR: its topology, a timeline of every rank and
    node across attempts, the first failure with its last lines and exception, and links to
    every log. DIR is a launcher's or a simulation's log dir (its latest run is read) or one
    of their run folders [default: $MALAUNCH_LOG_DIR, else $MA_LOG_DIR, else ./malaunch-logs]."""
    # Imported here: the report package is needed by this command alone (start-up cost).
    from malaunch.report.write import write_report  # noqa: PLC0415 (start-up cost, see above)

    if out is None:
        raise UsageError("--html OUT is required: the file to write the page to")
    log_dir = directory or default_log_dir(os.environ)  # the same default as `logs`
    job = write_report(pick_run(log_dir, run_name) if run_name else log_dir, out)
    processes = sum(len(node.rows) for node in job.nodes)
    counts = [
        plural(len(job.nodes), "node"),
        plural(processes, "process"),
        plural(len(job.failures), "failure"),
    ]
    click.echo(f"wrote {out} ({job.directory.name}: {', '.join(counts)})")
