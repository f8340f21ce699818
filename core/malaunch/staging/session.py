"""Staging around one launch: the launcher's side of SPEC §10.

:func:`read_mappings` reads ``--stage-in``, ``--stage-out`` and ``--path-mapping`` before the
topology wait, so that a malformed mapping or an unknown scheme costs nothing (64, 65, 66).
Once the plan is known, a :class:`StagedRun` stages in (before any rank starts, once per node:
a restart finds its inputs in place), uploads the outputs every ``--sync-interval`` seconds
while the ranks run, and makes the final upload from the supervisor's ``finish`` hook, after
the last attempt's processes have ended and before the summary is written, which then carries
what staging did. The launcher hands the supervisor a :class:`StagingStep`: its stage-in runs
as the node's preparation, after the node joined the job and while its event loop goes on, so
that a failure reaches every node (:mod:`malaunch.supervisor.prepare`).
"""

from __future__ import annotations

import datetime
import signal
import threading
import time
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    TextIO,
    Union,
)

from malaunch.errors import MalaunchError, UsageError
from malaunch.log import logger
from malaunch.models import Topology
from malaunch.staging.errors import StagingError
from malaunch.staging.models import MappingReport, StageMapping
from malaunch.staging.parse import parse_pairs
from malaunch.staging.pathmap import read_path_mapping
from malaunch.staging.remote import S3_SCHEMES, check_scheme
from malaunch.staging.transfer import remove_unfinished
from malaunch.supervisor.options import Finished
from malaunch.wording import plural

if TYPE_CHECKING:
    from malaunch.staging.stager import Stager

# After SIGTERM the platform kills the pod at the end of its own grace period: the final upload
# gets this long once the ranks have ended (`malaunch render` asks for --grace-period + 15 s).
# Long uploads belong in --sync-interval passes, so that little is left for this one.
STAGE_OUT_AFTER_SIGNAL = 10.0
# Once the final upload is told to stop (its deadline, a second signal), how long it is waited
# for: a transfer stuck where no stop reaches it (a dead connection, a hung disk) is left.
FINAL_STOP_WAIT = 2.0


def read_mappings(
    stage_in: Sequence[str], stage_out: Sequence[str], path_mapping: Optional[str]
) -> List[StageMapping]:
    """Every mapping of the command line, each URL's scheme checked (installed library too).

    :raises UsageError: a value that is not LOCAL=URL, an unknown scheme, a missing library.
    :raises MissingInputError, MappingFileError: a ``--path-mapping`` file missing, malformed.
    """
    mappings = [*parse_pairs(stage_in, "--stage-in"), *parse_pairs(stage_out, "--stage-out")]
    for mapping in mappings:
        _check_url(mapping.url, f"--stage-{mapping.direction} {mapping.local}={mapping.url}")
    if path_mapping:
        from_file = read_path_mapping(path_mapping)
        for mapping in from_file:
            _check_url(mapping.url, f"--path-mapping {path_mapping}: {mapping}")
        mappings += from_file
    return mappings


def _check_url(url: str, what: str) -> None:
    check_scheme(url, what)
    scheme, _, rest = url.partition("://")
    if scheme.lower() in S3_SCHEMES and not rest.split("/", 1)[0]:
        # botocore would refuse it only at the first request, after the topology wait
        msg = f"{what}: expected {scheme}://BUCKET[/PREFIX]"
        raise UsageError(msg)


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


class SignalLimit:
    """Signals while staging runs in the main thread, between the supervisor's stretches.

    The first SIGTERM, SIGINT or SIGHUP sets a deadline ``grace`` seconds away (0: stop now);
    a second one, or reaching the deadline (``deadline``, or the signal's), cancels the
    stager. The handlers only record the signal and wake a watcher thread, which cancels:
    cancelling takes the stager's lock, which the interrupted main thread may be holding.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(
        self,
        stager: Stager,
        clock: Callable[[], float],
        grace: float,
        deadline: Optional[float] = None,
    ) -> None:
        self.stager, self.clock, self.grace, self.deadline = stager, clock, grace, deadline
        self.caught: List[int] = []
        self._wake = threading.Event()
        self._done = False
        self._previous: Dict[int, Any] = {}
        self._thread = threading.Thread(target=self._watch, name="malaunch-stage-limit")

    def __enter__(self) -> SignalLimit:
        self._thread.start()
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._done = True
        self._wake.set()
        self._thread.join()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.caught.append(signum)
        self._wake.set()

    def _watch(self) -> None:
        deadline = self.deadline
        while True:
            timeout = None if deadline is None else max(0.0, deadline - self.clock())
            woke = self._wake.wait(timeout)
            if self._done:
                return
            if woke:
                self._wake.clear()
                if len(self.caught) < 2 and self.grace > 0:
                    due = self.clock() + self.grace
                    deadline = due if deadline is None else min(deadline, due)
                    name = signal.Signals(self.caught[0]).name
                    left = max(0.0, deadline - self.clock())
                    logger.info(f"{name}: staging stops in {left:.0f}s (another signal: now)")
                    continue
            self.stager.cancel()
            return


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
            uploads_shared=topology.node_rank == shared_uploader(topology),
            stream=stream,  # None: stderr through the console writer (malaunch.progress)
            clock=clock,
        )
        self.sync_interval = sync_interval
        self.clock = clock
        self.record: Dict[str, Any] = {}

    def prepare(self) -> None:
        """Check the outputs' buckets, bring every input here, then start the periodic
        uploads: in a worker thread (the supervisor's preparation), whose signals are the
        supervisor's, which calls :meth:`cancel`. Raises the engine's errors (64, 65, 66,
        74), a :class:`StagingError` (74) when cancelled; no rank has started yet."""
        start = _now()
        self.stager.preflight()
        reports = self.stager.stage_in()
        self.record["stage_in"] = phase_record(start, reports)
        self.stager.start_periodic(self.sync_interval)

    def finish(self, launcher_signal: Optional[int]) -> Finished:
        """The supervisor's ``finish`` hook: the final upload, after success, failure or a
        signal. A signal (before or during it) leaves it :data:`STAGE_OUT_AFTER_SIGNAL`
        seconds; a second signal stops it at once."""
        start = _now()
        deadline = self.clock() + STAGE_OUT_AFTER_SIGNAL if launcher_signal else None
        ended: List[Optional[MalaunchError]] = []
        # In a thread of its own, so that whatever it is stuck on, the launcher is not.
        upload = threading.Thread(
            target=self._final_upload, args=(deadline, ended), name="malaunch-stage-out",
            daemon=True,
        )  # fmt: skip
        with SignalLimit(self.stager, self.clock, STAGE_OUT_AFTER_SIGNAL, deadline):
            upload.start()
            self._wait(upload, deadline)
        if ended:
            error = ended[0]
        else:
            error = StagingError("stage-out: stopped; files in flight did not stop and were left")
            logger.warning(str(error))
        outputs = [report for report in self.stager.reports() if report.direction == "out"]
        if outputs:
            self.record["stage_out"] = phase_record(start, outputs)
            # The phase's errors are the final pass's: a periodic pass's failure that a later
            # pass made good stays in its mapping's record only.
            self.record["stage_out"]["errors"] = [str(error)] if error is not None else []
            # LOCALs that did not exist at the final pass (warned about): no error, since a
            # job that failed early may well not have written them
            self.record["stage_out"]["missing"] = list(self.stager.missing)
        return Finished({"staging": self.record}, error)

    def cancel(self) -> None:
        """Stop every transfer under way (the launcher is going away)."""
        self.stager.cancel()

    def _final_upload(
        self, deadline: Optional[float], ended: List[Optional[MalaunchError]]
    ) -> None:
        try:
            self.stager.stop_periodic()
            self.stager.stage_out(final=True, deadline=deadline)
        except MalaunchError as exc:
            ended.append(exc)
        except Exception as exc:  # the job has run: its summary must still be written
            ended.append(StagingError(f"stage-out: {type(exc).__name__}: {exc}"))
        else:
            ended.append(None)

    def _wait(self, upload: threading.Thread, deadline: Optional[float]) -> None:
        """Until ``upload`` ends, or :data:`FINAL_STOP_WAIT` after it was told to stop."""
        leave_at: Optional[float] = None
        while upload.is_alive():
            upload.join(0.2)
            now = self.clock()
            stopped = self.stager.cancelled or (deadline is not None and now >= deadline)
            if stopped and leave_at is None:
                leave_at = now + FINAL_STOP_WAIT
            if leave_at is not None and now >= leave_at:
                return


def shared_uploader(topology: Topology) -> int:
    """The node that uploads the shared outputs: the one whose processes include rank 0, which
    is where a job writes its checkpoints (TensorFlow's chief or worker 0, which need not be
    node 0: parameter-server nodes come first); node 0 when no node has a rank 0."""
    for position, node in enumerate(topology.nodes):
        if any(device.rank == 0 for device in node.devices):
            return position
    return 0


class StagingStep:
    """Data staging as the supervisor's ``prepare`` and ``finish`` hooks.

    The :class:`StagedRun` is built in :meth:`run`, in the preparation thread, so that what
    its construction refuses (half a credential pair, ``obs://`` without an endpoint) is a
    failed stage-in the other nodes hear of, like a missing prefix.
    """

    name = "stage-in"

    def __init__(
        self,
        mappings: Sequence[StageMapping],
        environ: Mapping[str, str],
        topology: Topology,
        *,
        launch_dir: Union[str, Path],
        sync_interval: float = 0.0,
    ) -> None:
        self._args = (mappings, environ, topology, launch_dir, sync_interval)
        self.staged: Optional[StagedRun] = None
        self._lock = threading.Lock()
        self._cancelled = False

    def run(self) -> None:
        mappings, environ, topology, launch_dir, sync_interval = self._args
        staged = StagedRun(
            mappings, environ, topology, launch_dir=launch_dir, sync_interval=sync_interval
        )
        with self._lock:
            self.staged = staged
            cancelled = self._cancelled
        if cancelled:
            staged.cancel()  # a cancel() that came while it was being built
        staged.prepare()

    def cancel(self) -> None:
        """Stop the stage-in, or the periodic uploads (any thread, not a signal handler)."""
        with self._lock:
            self._cancelled = True
            staged = self.staged
        if staged is not None:
            staged.cancel()

    def abandon(self) -> None:
        """The stage-in did not stop in time and is left behind: the files it was writing go
        (nothing half-written stays in the data folder)."""
        removed = remove_unfinished()
        if removed:
            logger.debug(f"stage-in: removed {plural(removed, 'unfinished download')}")

    def finish(self, launcher_signal: Optional[int]) -> Finished:
        if self.staged is None:
            return Finished()
        return self.staged.finish(launcher_signal)
