"""Staging around one launch: the launcher's side of SPEC §10.

:func:`read_mappings` reads ``--stage-in``, ``--stage-out`` and ``--path-mapping`` before the
topology wait, so that a malformed mapping or an unknown scheme costs nothing (64, 65, 66).
Once the plan is known, a :class:`StagedRun` stages in (before any rank starts, once per node:
a restart finds its inputs in place), uploads the outputs every ``--sync-interval`` seconds
while the ranks run, and makes the final upload from the supervisor's ``finish`` hook, after
the last attempt's processes have ended and before the summary is written, which then carries
what staging did.
"""

from __future__ import annotations

import datetime
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TextIO, Union

from malaunch.errors import MalaunchError
from malaunch.models import Topology
from malaunch.staging.errors import StagingError
from malaunch.staging.models import Mapping as StageMapping
from malaunch.staging.models import MappingReport
from malaunch.staging.parse import parse_pairs
from malaunch.staging.pathmap import read_path_mapping
from malaunch.staging.remote import check_scheme
from malaunch.supervisor.options import Finished

# After SIGTERM the platform kills the pod at the end of its own grace period: the final upload
# gets this long once the ranks have ended (`malaunch render` asks for --grace-period + 15 s).
# Long uploads belong in --sync-interval passes, so that little is left for this one.
STAGE_OUT_AFTER_SIGNAL = 10.0


def read_mappings(
    stage_in: Sequence[str], stage_out: Sequence[str], path_mapping: Optional[str]
) -> List[StageMapping]:
    """Every mapping of the command line, each URL's scheme checked (installed library too).

    :raises UsageError: a value that is not LOCAL=URL, an unknown scheme, a missing library.
    :raises MissingInputError, MappingFileError: a ``--path-mapping`` file missing, malformed.
    """
    mappings = [*parse_pairs(stage_in, "--stage-in"), *parse_pairs(stage_out, "--stage-out")]
    for mapping in mappings:
        check_scheme(mapping.url, f"--stage-{mapping.direction} {mapping.local}={mapping.url}")
    if path_mapping:
        from_file = read_path_mapping(path_mapping)
        for mapping in from_file:
            check_scheme(mapping.url, f"--path-mapping {path_mapping}: {mapping}")
        mappings += from_file
    return mappings


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="milliseconds")


def phase_record(start: str, reports: Sequence[MappingReport]) -> Dict[str, Any]:
    """One phase of the summary's ``staging`` record (see :mod:`malaunch.supervisor.summary`)."""
    return {
        "start_time": start,
        "end_time": _now(),
        "files": sum(report.files for report in reports),
        "bytes": sum(report.bytes for report in reports),
        "errors": [error for report in reports for error in report.errors],
        "mappings": [report.as_dict() for report in reports],
    }


class StagedRun:
    """The staging of this node's part of a launch; the :class:`Stager` is built here, so an
    unknown ``{rank}`` (a plan without ranks) is refused before anything moves."""

    def __init__(
        self,
        mappings: Sequence[StageMapping],
        environ: Mapping[str, str],
        topology: Topology,
        *,
        launch_dir: Union[str, Path],
        sync_interval: float = 0.0,
        stream: Optional[TextIO] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # The engine (and with it fsspec) is imported only by a launch that stages.
        from malaunch.staging.stager import Stager  # noqa: PLC0415 (start-up)

        devices = topology.local_devices
        self.stager = Stager(
            mappings,
            environ,
            launch_dir=launch_dir,
            node_rank=topology.node_rank,
            nnodes=topology.nnodes,
            rank_of_node=devices[0].rank if devices else None,
            stream=stream if stream is not None else sys.stderr,
            clock=clock,
        )
        self.sync_interval = sync_interval
        self.clock = clock
        self.record: Dict[str, Any] = {}

    def stage_in(self) -> None:
        """Check the outputs' buckets, bring every input here, then start the periodic
        uploads. Raises the engine's errors (64, 65, 66, 74): no rank has started yet."""
        start = _now()
        self.stager.preflight()
        reports = self.stager.stage_in()
        self.record["stage_in"] = phase_record(start, reports)
        self.stager.start_periodic(self.sync_interval)

    def finish(self, launcher_signal: Optional[int]) -> Finished:
        """The supervisor's ``finish`` hook: the final upload, after success, failure or a
        signal (then within :data:`STAGE_OUT_AFTER_SIGNAL` seconds)."""
        self.stager.stop_periodic()
        deadline = self.clock() + STAGE_OUT_AFTER_SIGNAL if launcher_signal else None
        start = _now()
        error: Optional[MalaunchError] = None
        try:
            self.stager.stage_out(final=True, deadline=deadline)
        except MalaunchError as exc:
            error = exc
        except Exception as exc:  # the job has run: its summary must still be written
            error = StagingError(f"stage-out: {type(exc).__name__}: {exc}")
        outputs = [report for report in self.stager.reports() if report.direction == "out"]
        if outputs:
            self.record["stage_out"] = phase_record(start, outputs)
        return Finished({"staging": self.record}, error)

    def cancel(self) -> None:
        """Stop every transfer under way (the launcher is going away)."""
        self.stager.cancel()
