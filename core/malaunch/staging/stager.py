"""The staging engine of one node: stage-in before the ranks start, stage-out while they run
and after they end.

The launcher builds one :class:`Stager` per launch (which checks every mapping at once: an
unknown scheme or a missing library is exit 64 before anything starts), calls
:meth:`Stager.stage_in` before it starts any rank, :meth:`Stager.start_periodic` with
``--sync-interval`` (a thread: the launcher's event loop never waits for an upload), and after
the ranks end (on success, failure or SIGTERM) :meth:`Stager.stop_periodic` then
:meth:`Stager.stage_out` with the grace period's end as the deadline.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, TextIO, Tuple, Union

from malaunch.errors import MalaunchError, MissingInputError
from malaunch.log import logger
from malaunch.staging import passes
from malaunch.staging.errors import StagingError
from malaunch.staging.localfs import Skips, local_error
from malaunch.staging.models import MappingReport, RetryPolicy, StageMapping
from malaunch.staging.parse import expand, per_node, placeholders
from malaunch.staging.pool import Run, Target
from malaunch.staging.readers import fsspec_reader, s3fs_reader
from malaunch.staging.remote import (
    S3_SCHEMES,
    missing_credentials,
    open_filesystem,
    scheme_of,
)
from malaunch.staging.transfer import Cancelled, RetryNotes, no_credentials, retrying
from malaunch.wording import plural

WORKERS = 32


class Stager:
    """Stages ``mappings`` for node ``node_rank`` of ``nnodes``.

    ``rank_of_node`` (the global rank of this node's first process) is what ``{rank}`` stands
    for; on a node without ranks (a parameter server's) a mapping that names ``{rank}`` is
    skipped. An output mapping without ``{node}`` or ``{rank}`` in LOCAL is shared: uploaded
    by the one node whose ``uploads_shared`` is true (default: node 0; the launcher passes the
    node that holds rank 0). ``environ`` gives the endpoints and credentials
    (:mod:`malaunch.staging.remote`).

    :raises UsageError: an unknown scheme, a missing library (64).
    :raises MissingInputError: a half-set credential pair, ``obs://`` without endpoint (66).
    """

    def __init__(
        self,
        mappings: Sequence[StageMapping],
        environ: Mapping[str, str],
        *,
        launch_dir: Union[str, Path],
        node_rank: int = 0,
        nnodes: int = 1,
        rank_of_node: Optional[int] = None,
        uploads_shared: Optional[bool] = None,
        workers: int = WORKERS,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 (frozen model: shared safely)
        stream: Optional[TextIO] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node_rank, self.nnodes = node_rank, nnodes
        self.workers, self.retry, self.stream, self.clock = max(1, workers), retry, stream, clock
        base = Path(launch_dir)
        self.inputs: List[Target] = []
        self.outputs: List[Target] = []
        self.missing: List[str] = []  # outputs whose LOCAL was not there at the final pass
        self.notes = RetryNotes(clock)
        self.skips = Skips()  # the FIFOs and devices met, each said once
        shared = node_rank == 0 if uploads_shared is None else uploads_shared
        for mapping in mappings:
            if mapping.direction == "out" and not shared and not per_node(mapping):
                continue  # a shared output: another node uploads it
            if rank_of_node is None and "rank" in placeholders(
                mapping.local + mapping.url, str(mapping)
            ):
                logger.info(f"{mapping}: skipped here, {{rank}} names no process of this node")
                continue
            target = _target(expand(mapping, node_rank, rank_of_node), base, environ)
            (self.inputs if mapping.direction == "in" else self.outputs).append(target)
        self._totals: Dict[Tuple[str, str, str], MappingReport] = {}
        self._active: List[threading.Event] = []
        self._lock = threading.Lock()
        self._out_lock = threading.Lock()
        self._cancelled = False
        self._periodic: Optional[threading.Thread] = None
        self._periodic_stop = threading.Event()

    def preflight(self) -> None:
        """Check what can be checked before the job starts: each output's bucket is there
        and the credentials work (inputs are checked by :meth:`stage_in`'s listing).

        :raises MissingInputError: no such bucket, no credentials (66).
        :raises StagingError: the server cannot be reached, after the retries (74).
        """
        run = self._run(keep_going=False)
        with self._lock:  # cancel() cuts its retry waits short, as a pass's
            if self._cancelled:
                run.abort.set()
            self._active.append(run.abort)
        try:
            for target in self.outputs:
                if target.atomic_put:
                    _check_bucket(target, run)
        except Cancelled as exc:
            msg = f"{exc}: stopped before the output buckets were checked"
            raise StagingError(msg) from exc
        finally:
            self.notes.flush()
            with self._lock:
                self._active.remove(run.abort)

    def stage_in(self) -> List[MappingReport]:
        """Bring every input to this node, mapping after mapping, files in parallel.

        :raises MissingInputError: no such bucket, object or prefix; no credentials (66).
        :raises MappingFileError: a key that cannot be a path under LOCAL (65).
        :raises StagingError: a transfer failed after the retries, or :meth:`cancel` (74).
        :raises UsageError: a destination that cannot be a folder (64); the local
            filesystem's other errors are 74 (:mod:`malaunch.staging.localfs`).
        """
        reports = [self._pass(t, passes.stage_in, keep_going=False) for t in self.inputs]
        if reports and not any(report.files or report.removed for report in reports):
            # Silence would leave "was it skipped, or did it not run?" open.
            fresh = sum(report.skipped for report in reports)
            logger.info(f"stage-in: {plural(fresh, 'file')} up to date, 0 B transferred")
        return reports

    def stage_out(
        self, final: bool = True, deadline: Optional[float] = None
    ) -> List[MappingReport]:
        """Upload what changed in every output this node uploads.

        ``deadline`` (on this stager's clock, ``time.monotonic``): stop there, as at the end of
        the grace period after SIGTERM. A periodic pass (``final=False``) reports its errors;
        the final pass raises them after trying every file.

        :raises StagingError: (final pass) files that could not be uploaded (74), or the
            class of the first error: a LOCAL that cannot be read is 66
            (:mod:`malaunch.staging.localfs`).
        """
        raised: List[BaseException] = []
        with self._out_lock:
            reports = [
                self._pass(t, passes.stage_out, True, deadline=deadline, failures=raised)
                for t in self.outputs
            ]
            if final:
                self.missing = [str(t.mapping.local) for t in self.outputs if not t.local.exists()]
        for local in self.missing if final else ():
            # A typo in LOCAL, or a job that never wrote it: not an error (a failed job may
            # not have), but nothing to find at the URL afterwards must not go unsaid.
            logger.warning(f"stage-out: {local} does not exist: nothing uploaded from it")
        failed = [error for report in reports for error in report.errors]
        if final and failed:
            more = f" (and {plural(len(failed) - 1, 'more error')})" if len(failed) > 1 else ""
            first = failed[0] if failed[0].startswith("stage-out: ") else f"stage-out: {failed[0]}"
            cls = type(raised[0]) if raised and isinstance(raised[0], MalaunchError) else None
            raise (cls or StagingError)(f"{first}{more}")
        return reports

    def start_periodic(self, interval: float) -> None:
        """Upload the outputs every ``interval`` seconds from a background thread."""
        if not self.outputs or interval <= 0 or self._periodic is not None or self._cancelled:
            return
        self._periodic_stop.clear()
        self._periodic = threading.Thread(
            target=self._every, args=(interval,), name="malaunch-stage-out", daemon=True
        )
        self._periodic.start()

    def stop_periodic(self) -> None:
        """Stop the periodic uploads; a pass under way finishes the files it has begun."""
        if self._periodic is None:
            return
        self._periodic_stop.set()
        self._periodic.join()
        self._periodic = None

    def cancel(self) -> None:
        """Stop every pass under way as soon as the files in flight are done (any thread)."""
        with self._lock:
            self._cancelled = True
            for event in self._active:
                event.set()
        self._periodic_stop.set()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled

    def reports(self) -> List[MappingReport]:
        """Every mapping's passes added up, inputs first: the summary's record."""
        return list(self._totals.values())

    def _every(self, interval: float) -> None:
        while not self._periodic_stop.wait(interval):
            try:
                self.stage_out(final=False)
            except Exception as exc:  # a periodic pass must never end the job
                logger.warning(f"periodic stage-out: {exc}")

    def _run(self, keep_going: bool, deadline: Optional[float] = None) -> Run:
        return Run(
            self.workers, self.retry, self.stream, threading.Event(), deadline, keep_going,
            self.clock, self.notes, self.skips,
        )  # fmt: skip

    def _pass(
        self,
        target: Target,
        action: Callable[[Target, Run], MappingReport],
        keep_going: bool,
        deadline: Optional[float] = None,
        failures: Optional[List[BaseException]] = None,
    ) -> MappingReport:
        """One pass over ``target``; the errors it met added to ``failures``. The staging
        boundary: an ``OSError`` that got this far unclassified is the local side's."""
        run = self._run(keep_going, deadline)
        periodic = threading.current_thread() is self._periodic
        if periodic:
            run.abort = self._periodic_stop  # stop_periodic() ends the pass's retry waits
        with self._lock:
            if self._cancelled:
                run.abort.set()
            self._active.append(run.abort)
        try:
            report = action(target, run)
        except Cancelled as exc:
            self._record(_failed(target, f"stopped: {exc}"))
            msg = f"{target.mapping}: stopped before the transfers were done"
            raise StagingError(msg) from exc
        except OSError as exc:
            direction = target.mapping.direction
            error = local_error(exc, target.local, reading=direction == "out", direction=direction)
            self._record(_failed(target, str(error)))
            raise error from exc
        except Exception as exc:
            self._record(_failed(target, str(exc)))
            raise
        finally:
            if failures is not None:
                failures.extend(run.failures)
            self.notes.flush()  # the retries not yet told, before the pass's result or error
            with self._lock:
                self._active.remove(run.abort)
        if periodic and self._periodic_stop.is_set():
            report = report.model_copy(update={"errors": ()})  # the final pass takes over
        self._record(report)
        return report

    def _record(self, report: MappingReport) -> None:
        key = (report.direction, report.local, report.url)
        with self._lock:
            old = self._totals.get(key)
            self._totals[key] = old.plus(report) if old else report


def _target(mapping: StageMapping, base: Path, environ: Mapping[str, str]) -> Target:
    fs, path = open_filesystem(mapping.url, environ)
    local = Path(mapping.local)
    scheme = scheme_of(mapping.url)
    s3 = scheme in S3_SCHEMES
    from fsspec.implementations.local import LocalFileSystem  # noqa: PLC0415 (as the URL's)

    on_this_machine = isinstance(fs, LocalFileSystem)
    reader = s3fs_reader(fs) if s3 else fsspec_reader(fs, local_source=on_this_machine)
    return Target(
        mapping, base / local if not local.is_absolute() else local, fs,
        path.rstrip("/") or path, s3, reader, on_this_machine,
    )  # fmt: skip


def _check_bucket(target: Target, run: Run) -> None:
    bucket = target.root.split("/", 1)[0]
    try:
        retrying(lambda: target.fs.call_s3("head_bucket", Bucket=bucket), target.mapping.url,
                 **run.retry_kw())  # fmt: skip
    except Exception as exc:
        cause = exc.__cause__ or exc
        if no_credentials(cause):
            scheme = scheme_of(target.mapping.url)
            raise MissingInputError(f"{target.mapping.url}: {missing_credentials(scheme)}") from exc
        raise


def _failed(target: Target, error: str) -> MappingReport:
    mapping = target.mapping
    return MappingReport(
        local=mapping.local, url=mapping.url, direction=mapping.direction, errors=(error,)
    )
