"""Running the file transfers of one pass in parallel, and what every pass needs to know.

The transfers run in daemon threads of the pass's own, not a ``ThreadPoolExecutor``: a pass
that is told to stop waits :data:`STOP_WAIT` seconds for the files in flight to stop at their
next piece, then leaves behind those that do not (a read blocked on a dead connection or a
stuck disk), which must then neither hold up the pass nor the launcher's exit (an executor's
threads are joined when the interpreter exits)."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from pathlib import Path
from typing import Any, Callable, Iterable, List, Optional, Sequence, TextIO, Tuple, TypeVar

from malaunch.errors import MalaunchError
from malaunch.staging.errors import StagingError
from malaunch.staging.localfs import Skips
from malaunch.staging.models import RetryPolicy, StageMapping
from malaunch.staging.progress import Progress
from malaunch.staging.readers import Reader
from malaunch.staging.transfer import Cancelled, RetryNotes
from malaunch.wording import plural

T = TypeVar("T")
STOP_WAIT = 1.0  # how long a stopped pass waits for the files in flight to stop


@dataclasses.dataclass(frozen=True)
class Target:
    """A mapping resolved on this node: placeholders expanded, LOCAL absolute, URL opened."""

    mapping: StageMapping
    local: Path
    fs: Any
    root: str  # the URL's path within ``fs``, without a trailing slash
    atomic_put: bool  # S3 and OBS: a PUT is atomic, so uploads need no temporary name
    reader: Reader  # how a download reads a file (readers.py)
    local_url: bool = False  # the URL is on this machine's filesystem (file://)


@dataclasses.dataclass
class Run:
    """One pass: its settings, and the event that stops it (cancel, deadline, first error)."""

    workers: int
    retry: RetryPolicy
    stream: Optional[TextIO]
    abort: threading.Event
    deadline: Optional[float] = None
    keep_going: bool = False  # stage-out: upload what can be, report the rest
    clock: Callable[[], float] = time.monotonic
    notes: Optional[RetryNotes] = None  # where retries are told (aggregated), None: each one
    skips: Skips = dataclasses.field(default_factory=Skips)  # FIFOs and devices, said once
    failures: List[BaseException] = dataclasses.field(default_factory=list)  # what failed

    def retry_kw(self) -> dict:  # type: ignore[type-arg]
        return {"retry": self.retry, "stop": self.abort, "notes": self.notes}


def run_all(
    run: Run, items: Sequence[T], work: Callable[[T], None], progress: Progress
) -> List[str]:
    """``work(item)`` for every item, ``run.workers`` at a time; the errors, one line each.

    Stops scheduling at the first error unless ``run.keep_going``, at ``run.abort`` and at
    ``run.deadline``; then waits at most :data:`STOP_WAIT` seconds for the transfers in flight
    (none past the deadline: the launcher is about to exit), which stop at their next piece
    and leave nothing half-written. The errors are also added to ``run.failures``.

    :raises MalaunchError: the first error, unless ``run.keep_going``.
    """
    if not items:
        return []
    jobs: List[Tuple[T, Future[None]]] = [(item, Future()) for item in items]
    pending = {future for _, future in jobs}
    _start(jobs, work, min(run.workers, len(items)))
    failures: List[BaseException] = []
    late = False
    try:
        while pending:
            # wakes at the first failure, when all are done, or to show progress: not at
            # every file (waiting installs a waiter on each pending future)
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
            progress.tick()
            failures.extend(_failures(done))
            if failures and not run.keep_going:
                run.abort.set()
            late = run.deadline is not None and run.clock() >= run.deadline
            if run.abort.is_set() or late:
                break
    finally:
        for future in pending:
            future.cancel()  # those not begun; the running ones see run.abort at a piece
        if pending and not late:
            wait(pending, timeout=STOP_WAIT)
        progress.finish()
    failures.extend(_failures(f for f in pending if f.done() and not f.cancelled()))
    run.failures.extend(exc for exc in failures if not isinstance(exc, Cancelled))
    left = sum(1 for f in pending if not f.done() or f.cancelled())
    return _errors(failures, late, run.abort.is_set(), left, run.keep_going)


def _start(jobs: List[Tuple[T, Future[None]]], work: Callable[[T], None], threads: int) -> None:
    """``threads`` daemon threads that take the jobs in turn, each settling its future."""
    queue = iter(jobs)
    lock = threading.Lock()

    def serve() -> None:
        while True:
            with lock:
                job = next(queue, None)
            if job is None:
                return
            item, future = job
            if not future.set_running_or_notify_cancel():
                continue  # cancelled before it began
            try:
                work(item)
            except BaseException as exc:  # reported by the pass: a bug included
                future.set_exception(exc)
            else:
                future.set_result(None)

    for number in range(threads):
        name = f"malaunch-stage-{number}"
        threading.Thread(target=serve, name=name, daemon=True).start()


def _failures(futures: Iterable[Future[None]]) -> List[BaseException]:
    out = []
    for future in futures:
        exc = None if future.cancelled() else future.exception()
        if exc is not None:
            out.append(exc)
    return out


def _errors(
    failures: List[BaseException], late: bool, aborted: bool, left: int, keep_going: bool
) -> List[str]:
    real = [exc for exc in failures if not isinstance(exc, Cancelled)]
    for exc in real:
        if not isinstance(exc, MalaunchError):
            raise exc  # a bug, not a transfer failure: the CLI reports it as one
    if real and not keep_going:
        raise real[0]
    errors = [str(exc) for exc in real]
    stopped = left + len(failures) - len(real)
    if late:
        errors.append(f"stopped at the deadline with {plural(stopped, 'file')} not transferred")
    elif aborted and stopped:
        msg = f"stopped with {plural(stopped, 'file')} not transferred"
        if not keep_going:
            raise StagingError(msg)
        errors.append(msg)
    return errors
