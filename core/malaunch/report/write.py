"""``malaunch report``'s entry: read a run's log dir, write its page."""

from __future__ import annotations

from pathlib import Path

from malaunch.errors import OutputError
from malaunch.files import output_path, why_not_written, write_atomic
from malaunch.report.collect import collect
from malaunch.report.model import JobReport
from malaunch.report.page import render_page


def write_report(directory: Path, out: Path) -> JobReport:
    """Write the HTML page of the run in ``directory`` to ``out``; return what it shows.

    :raises MissingInputError: ``directory`` is not the log dir of a run.
    :raises UsageError: ``out`` is a directory, FIFO or device (a link to a file is followed).
    :raises OutputError: ``out`` cannot be written (74).
    """
    destination = output_path(out, "--html")
    job = collect(directory)
    page = render_page(job, out.absolute().parent)
    try:
        write_atomic(destination, page)
    except OSError as exc:
        msg = f"cannot write the report {out}: {why_not_written(out, exc)}"
        raise OutputError(msg) from exc
    return job
