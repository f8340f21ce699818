"""Running a plan to the end: every attempt, the restarts between them, the summary.

:func:`supervise` starts every process of the plan (own session, log pipe, death with the
launcher; :mod:`malaunch.supervisor.spawn`), runs the event loop of
:mod:`malaunch.supervisor.loop` until all have ended, restarts the local group after a failure
when ``max_restarts`` allows it, and reports a summary. A watchdog
(:mod:`malaunch.supervisor.reaper`) kills every process group if the launcher itself is killed.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, List, Mapping, Optional, Tuple

from malaunch.errors import LaunchError
from malaunch.log import logger
from malaunch.models import LaunchPlan
from malaunch.supervisor.clock import Clock
from malaunch.supervisor.loop import Outcome, Supervision, how_it_ended
from malaunch.supervisor.output import (
    ConsoleWriter,
    FdConsole,
    LineRelay,
    RankSelection,
    console_prefix,
    describe,
    parse_console_ranks,
)
from malaunch.supervisor.reaper import Reaper
from malaunch.supervisor.signals import SignalWakeup
from malaunch.supervisor.spawn import Child, make_child_setup, spawn
from malaunch.supervisor.summary import report

__all__ = ["Outcome", "SuperviseOptions", "supervise"]


@dataclasses.dataclass(frozen=True)
class SuperviseOptions:
    """How to run a plan. The last fields exist for tests and embedding.

    ``console`` receives whole-line blocks of prefixed output (default: stdout); ``environ`` is
    the environment the plan's ``env`` is laid over (default: the launcher's own); ``clock``
    times the run and its deadlines (tests inject a virtual one); ``reaper`` starts the
    watchdog process.
    """

    log_dir: str
    console_ranks: str = "all"
    grace_period: float = 5.0
    max_restarts: int = 0
    forward_signals: Tuple[int, ...] = ()
    console: Optional[ConsoleWriter] = None
    environ: Optional[Mapping[str, str]] = None
    clock: Clock = dataclasses.field(default_factory=Clock)
    reaper: bool = True


@dataclasses.dataclass
class _Run:
    """What stays the same across the attempts of one supervise() call."""

    options: SuperviseOptions
    selection: RankSelection
    console: ConsoleWriter
    wakeup: SignalWakeup
    reaper: Reaper


def supervise(
    plan: LaunchPlan,
    options: SuperviseOptions,
    replan: Optional[Callable[[int], LaunchPlan]] = None,
) -> int:
    """Run the plan to the end and return the launcher's exit code (SPEC §3).

    ``replan(attempt)`` builds the plan of restart ``attempt`` (1, 2, ...), re-reading the
    topology; without it a restart runs the same plan again. Raises LaunchError (71) when a
    process cannot be started, after stopping those that were.
    """
    selection = parse_console_ranks(options.console_ranks)
    console = options.console if options.console is not None else FdConsole()
    with SignalWakeup(options.forward_signals) as wakeup:
        reaper = Reaper.start() if options.reaper else Reaper(None)
        try:
            run = _Run(options, selection, console, wakeup, reaper)
            outcome, restarts = _run_attempts(run, plan, replan)
        except BaseException:
            reaper.kill_all()  # a bug or a failed re-plan: leave nothing running behind us
            raise
        try:
            reaper.release()  # it exits while the summary is written
            report(outcome, restarts, options.log_dir)
        finally:
            reaper.close()
    if outcome.launch_error is not None:
        raise outcome.launch_error
    return outcome.exit_code


def _run_attempts(
    run: _Run, plan: LaunchPlan, replan: Optional[Callable[[int], LaunchPlan]]
) -> Tuple[Outcome, int]:
    attempt = 0
    while True:
        outcome = _run_attempt(run, plan, attempt)
        failure = outcome.first_failure
        limit = run.options.max_restarts
        stop = outcome.launcher_signal is not None or outcome.launch_error is not None
        if failure is None or stop or attempt >= limit:
            return outcome, attempt
        attempt += 1
        assert failure.returncode is not None  # a failure has ended
        logger.warning(
            f"restart {attempt} of {limit}: {describe(failure.spec)} "
            f"{how_it_ended(failure.returncode)}"
        )
        if replan is not None:
            plan = replan(attempt)


def _run_attempt(run: _Run, plan: LaunchPlan, attempt: int) -> Outcome:
    children: List[Child] = []
    error: Optional[LaunchError] = None
    environ = dict(os.environ if run.options.environ is None else run.options.environ)
    with run.wakeup.blocked() as mask:
        setup = make_child_setup(os.getpid(), run.wakeup.handled, mask)
        for spec in plan.processes:
            relay = None
            if run.selection.selects(spec):
                relay = LineRelay(console_prefix(spec), run.console)
            try:
                child = spawn(
                    spec,
                    environ=environ,
                    attempt=attempt,
                    setup=setup,
                    relay=relay,
                    clock=run.options.clock,
                )
            except LaunchError as exc:
                error = exc
                break
            run.reaper.watch(child.pid)
            children.append(child)
    supervision = Supervision(
        children, run.wakeup, run.reaper, run.options.grace_period, run.options.clock
    )
    if error is not None:
        return supervision.abort(error)
    logger.debug(f"started {len(children)} processes (attempt {attempt})")
    return supervision.run()
