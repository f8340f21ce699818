"""The last arrow of the pipeline: a ``LaunchPlan`` -> running processes -> one exit code.

:func:`supervise` installs the signal wakeup pipe and the reaper (a watchdog that kills every
process group if the launcher itself is killed), runs this node's part of the job
(:mod:`malaunch.supervisor.node`: the attempts, the job channel, restarts, hangs) and reports
the summary. Processes are started by :mod:`malaunch.supervisor.spawn` (own session, log pipe,
death with the launcher) and watched by :mod:`malaunch.supervisor.group`.
"""

from __future__ import annotations

from typing import Optional

from malaunch import console
from malaunch.job.server import connections_held
from malaunch.log import escape_controls, logger
from malaunch.models import LaunchPlan
from malaunch.supervisor.containment import Containment
from malaunch.supervisor.node import NodeRun, Replan
from malaunch.supervisor.options import Finished, SuperviseOptions
from malaunch.supervisor.outcome import Outcome
from malaunch.supervisor.output import parse_console_ranks
from malaunch.supervisor.preflight import check_open_files
from malaunch.supervisor.reaper import Reaper
from malaunch.supervisor.signals import SignalWakeup
from malaunch.supervisor.summary import report

__all__ = ["Outcome", "SuperviseOptions", "supervise"]


def supervise(
    plan: LaunchPlan,
    options: SuperviseOptions,
    replan: Optional[Replan] = None,
) -> int:
    """Run the plan to the end and return the launcher's exit code (SPEC §3).

    ``replan(attempt, master_port, hosts)`` builds the plan of restart ``attempt`` (1, 2,
    ...), re-reading the topology, with the fresh rendezvous port node 0 chose (or None) and
    the addresses replaced nodes came from; without it a restart runs the same plan again.
    Raises LaunchError (71) when a process cannot be started, after stopping those that
    were, or before starting any when the open-files limit cannot hold them all
    (:func:`~malaunch.supervisor.preflight.check_open_files`); PeerError (69) when the job's
    other node launchers did not join in time; and the error of ``options.prepare`` (data
    staging's stage-in: 64, 65, 66, 74) when it failed on this node.
    """
    selection = parse_console_ranks(options.console_ranks)
    job = options.job
    peers = connections_held(job.nnodes) if job is not None and job.serves else 0
    check_open_files(len(plan.processes), peers, hang=options.hang is not None)
    out, err = console.stdout(), console.stderr()  # made now: the loop flushes both
    for stream in (out, err):
        stream.hint = f"the log files in {escape_controls(options.log_dir)} hold them"
    writer = options.console if options.console is not None else out.write
    with SignalWakeup(options.forward_signals) as wakeup:
        containment = Containment.start() if options.containment else Containment()
        reaper = Reaper.start() if options.reaper else Reaper(None)
        reaper.kill_cgroup(containment.cgroup)
        node = NodeRun(
            plan,
            options,
            replan,
            wakeup=wakeup,
            reaper=reaper,
            selection=selection,
            console=writer,
            containment=containment,
        )
        try:
            outcomes = node.run()
        except BaseException:
            reaper.kill_all()  # a bug, a failed re-plan, peers that never came: leave nothing
            raise
        last = outcomes[-1]
        finished = Finished()
        # Only after ranks ran: a job stopped before its start has nothing to upload.
        if options.finish is not None and last.launch_error is None and node.started:
            finished = options.finish(last.launcher_signal)
        try:
            reaper.release()  # it exits while the summary is written
            dropped = sum(stream.dropped_total for stream in console.streams())
            report(
                outcomes,
                options.log_dir,
                options.tail_lines,
                finished,
                options.tail_reader,
                console_dropped=dropped,
                nodes=plan.topology.nnodes,
            )
        finally:
            reaper.close()
    # The summary is the last thing shown: a stalled reader gets a short grace for it (the
    # signal handlers are the default ones again: a SIGTERM now ends the launcher at once).
    console.drain(console.EXIT_GRACE)
    if last.launch_error is not None:
        raise last.launch_error
    if finished.error is not None:
        if last.exit_code == 0:
            raise finished.error
        # The job's own failure is what the platform must act on; this one is said beside it.
        logger.error(str(finished.error))
    return last.exit_code
