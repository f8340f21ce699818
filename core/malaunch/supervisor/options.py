"""How to run a plan: the options of :func:`malaunch.supervisor.supervise.supervise`."""

from __future__ import annotations

import dataclasses
import socket
from typing import Any, Callable, Mapping, Optional, Protocol, Tuple

from malaunch.errors import MalaunchError
from malaunch.events import Clock
from malaunch.hang.watch import HangSettings
from malaunch.job.restart import RestartPolicy
from malaunch.job.settings import JobSettings
from malaunch.job.success import ALL_WORKERS
from malaunch.supervisor.output import ConsoleWriter
from malaunch.supervisor.tail import TailReader, own_log


@dataclasses.dataclass(frozen=True)
class Finished:
    """What a ``finish`` hook did after the last attempt: keys it adds to the summary, and an
    error that turns a run which otherwise succeeded into a failure with the error's code (or
    is reported beside the job's own failure, whose code is kept)."""

    summary: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    error: Optional[MalaunchError] = None


# Called with the signal that stopped the launcher (None when nothing did).
FinishHook = Callable[[Optional[int]], Finished]


class Handover(Protocol):
    """The job channel as the launch set it up before the start
    (:class:`malaunch.supervisor.prestart.EarlyChannel`): :meth:`adopt` hands it to the running
    node, which from then on tells the job itself; it returns node 0's bound listener."""

    def adopt(self) -> Optional[socket.socket]: ...


class Preparation(Protocol):
    """What a node does after joining the job and before it says ``ready`` (data staging's
    stage-in: :mod:`malaunch.staging.session`). :meth:`run` runs in a worker thread while the
    event loop goes on (heartbeats, signals, the job's commands); it raises a
    :class:`MalaunchError` when the node cannot take part. :meth:`cancel` (any thread) makes a
    :meth:`run` under way end soon."""

    name: str  # what the logs call it: "stage-in"

    def run(self) -> None: ...

    def cancel(self) -> None: ...

    def abandon(self) -> None:
        """A cancelled :meth:`run` did not end in time and is left behind (its thread dies with
        the launcher): take away what it leaves half-done."""


@dataclasses.dataclass(frozen=True)
class SuperviseOptions:
    """How to run a plan. The last fields exist for tests, embedding and ``simulate``.

    ``job``: the job channel of a multi-node job (None: this node is the whole job);
    ``restart``: the job-wide restart policy; ``hang``: hang detection (None: off).
    ``console`` receives whole-line blocks of prefixed output (default: stdout's
    :class:`malaunch.console.ConsoleStream`, which drops console copies rather than block the
    loop on a stalled reader); ``console_raw``: pass terminal controls through unescaped;
    ``environ`` is
    the environment the plan's ``env`` is laid over (default: the launcher's own); ``clock``
    times the run and its deadlines (tests inject a virtual one); ``reaper`` starts the
    watchdog process. ``fail_fast=False`` lets the other processes run on after a failure
    (``simulate``'s node launchers stop themselves), with ``straggler_timeout`` as the safety
    net for those that do not. ``containment`` makes the launcher a child subreaper and puts
    the job in a cgroup of its own where it can (see :mod:`malaunch.supervisor.containment`).
    ``tail_lines``: how many of the failed rank's last log lines the summary shows;
    ``tail_reader`` reads them (default: the process's own log; ``simulate`` reads the failed
    node's summary instead, which holds its rank's tail, not the node launcher's console).
    ``console_prefix``: a template with ``{node}``, ``{host}``, ``{rank}``, ``{local_rank}``,
    ``{role}`` (None: ``[rank N]``); ``console_dedup``: fold identical lines of many ranks.
    ``replace_lost``: a process killed by a signal while others run is started again after
    that many seconds (``simulate --replace-lost``: a node launcher, as a kubelet restarts a
    container). ``prepare`` runs once every node has joined the job, before attempt 0 (data
    staging's stage-in); ``finish`` runs once the last attempt's processes have ended, before the
    summary is written (data staging's final upload: :mod:`malaunch.staging.session`), and
    only when an attempt has started (a job stopped before its start uploads nothing).
    ``say_start``: each attempt's start is said on the console (``simulate`` has said what
    it starts).
    ``success_policy``: when the job has succeeded, ``all-workers`` or ``chief``
    (:mod:`malaunch.job.success`).
    ``run_started`` is called once, when the first attempt's processes have started (the
    launch's run folder then becomes its log dir's ``latest``: :mod:`malaunch.supervisor.runs`).
    ``channel``: the job channel node 0 already listens on (see :class:`Handover`; None: the
    node sets it up itself).
    """

    log_dir: str
    console_ranks: str = "all"
    grace_period: float = 5.0
    restart: RestartPolicy = dataclasses.field(default_factory=RestartPolicy)
    forward_signals: Tuple[int, ...] = ()
    job: Optional[JobSettings] = None
    hang: Optional[HangSettings] = None
    console: Optional[ConsoleWriter] = None
    environ: Optional[Mapping[str, str]] = None
    clock: Clock = dataclasses.field(default_factory=Clock)
    reaper: bool = True
    fail_fast: bool = True
    straggler_timeout: Optional[float] = None
    containment: bool = True
    tail_lines: int = 20
    tail_reader: TailReader = own_log
    console_prefix: Optional[str] = None
    console_dedup: bool = False
    console_raw: bool = False
    prepare: Optional[Preparation] = None
    finish: Optional[FinishHook] = None
    say_start: bool = True
    replace_lost: Optional[float] = None
    success_policy: str = ALL_WORKERS
    run_started: Optional[Callable[[], None]] = None
    channel: Optional[Handover] = None
