"""This node's part of the job, from the first attempt to the last: one event loop for the
signals, the job channel, the heartbeats and each attempt's processes.

The job's decisions are the :class:`~malaunch.job.coordinator.Coordinator`'s, reached through
the :class:`~malaunch.supervisor.link.JobLink`. This module joins the job, prepares (the
stage-in, in a thread: :mod:`malaunch.supervisor.prepare`), says ``ready``, starts attempts
when told ``start``, hands local events to the :class:`~malaunch.supervisor.attempt.Attempt`,
redials a lost node 0's replacement once its processes are down, and ends with a final
verdict. A failed preparation is reported before this launcher exits with its error.
"""

from __future__ import annotations

import signal
from functools import partial
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from malaunch.console import streams as console_streams
from malaunch.errors import ExitCode, LaunchError, MalaunchError, PeerError
from malaunch.events import EventLoop
from malaunch.hang.heartbeat import HeartbeatSocket
from malaunch.job.protocol import Message
from malaunch.job.replacement import absent_nodes, hosts_of, losses_of
from malaunch.log import logger
from malaunch.models import LaunchPlan, ProcessSpec
from malaunch.supervisor.attempt import Attempt, StartAgain, describe_failure, waiting_line
from malaunch.supervisor.containment import Containment
from malaunch.supervisor.dedup import Deduper
from malaunch.supervisor.group import Group
from malaunch.supervisor.link import JobLink
from malaunch.supervisor.options import SuperviseOptions
from malaunch.supervisor.outcome import Outcome
from malaunch.supervisor.output import ConsoleWriter, LineRelay, RankSelection
from malaunch.supervisor.prepare import CLOSE_WAIT, PreparationThread
from malaunch.supervisor.reaper import Reaper
from malaunch.supervisor.runlog import RunLog
from malaunch.supervisor.signals import SignalWakeup
from malaunch.supervisor.spawn import Child
from malaunch.supervisor.starting import relay_for, runtime_env, say_started, start_processes

# (attempt, node 0's fresh rendezvous port, replaced nodes' addresses) -> that attempt's plan
Replan = Callable[[int, Optional[int], Mapping[int, str]], LaunchPlan]


class NodeRun:
    """Runs this node's attempts until the job's final verdict; :meth:`run` returns them."""

    def __init__(
        self,
        plan: LaunchPlan,
        options: SuperviseOptions,
        replan: Optional[Replan],
        *,
        wakeup: SignalWakeup,
        reaper: Reaper,
        selection: RankSelection,
        console: ConsoleWriter,
        containment: Containment,
    ) -> None:
        self.plan = plan
        self.options = options
        self.replan = replan
        self.wakeup = wakeup
        self.reaper = reaper
        self.selection = selection
        self.console = console
        self.loop = EventLoop(options.clock)
        self.node = plan.topology.node_rank if options.job is not None else 0
        self.attempt: Optional[Attempt] = None
        self.outcomes: List[Outcome] = []
        self.error: Optional[BaseException] = None
        self.finished = False
        self.preparing: Optional[PreparationThread] = None
        self.prepared = False  # the job's "prepare" came (once)
        self.started = False  # an attempt was started here: the finish hook has work to do
        self.pending_signals: List[int] = []
        self.heartbeat: Optional[HeartbeatSocket] = None
        self.link = JobLink(self.loop, options, plan.topology, self.node, self._on_command)
        self.containment = containment
        self.runlog = RunLog(options.log_dir, plan, self.loop.clock.wall(), options.run_started)
        for stream in console_streams():  # flushed by the loop: a slow reader never blocks it
            self.loop.add_output(stream)
        self.deduper = (
            Deduper(self.loop, console, options.console_prefix, not options.console_raw)
            if options.console_dedup
            else None
        )

    # -- the whole run --------------------------------------------------------------------

    def run(self) -> List[Outcome]:
        self.loop.add_reader(self.wakeup.read_fd, self._on_signals)
        try:
            if self.options.hang is not None:
                self.heartbeat = HeartbeatSocket(self.loop, self._on_beat)
            self.link.connect(self._on_lost, self._interrupted)
            if self.pending_signals:  # a signal while this node waited to join node 0
                self._signalled_between_attempts(self.pending_signals[0])
            # The stage-in starts on the job's "prepare", once every node has joined.
            self.loop.run_until(self._step)
        finally:
            self._close()
        if self.error is not None:
            raise self.error
        return self.outcomes

    def _step(self) -> bool:
        """After each round of events: move the attempt along; True once the run is over."""
        attempt = self.attempt
        if attempt is not None:
            if attempt.capture is not None:
                attempt.capture.poll()
            attempt.tick()
            if attempt.over():
                self._retire(attempt)
        if self.attempt is None and not self.finished and self.link.rejoin_since is not None:
            self._rejoin()
        # a cancelled stage-in ends first; node 0 tells later nodes why a job ended unstarted
        return self.finished and self.preparing is None and self.link.may_leave()

    def _retire(self, attempt: Attempt) -> None:
        """Keep an attempt that is over; a final verdict or a signal here ends the run."""
        attempt.group.close()
        self.outcomes.append(attempt.outcome)
        self.attempt = None
        verdict = attempt.outcome.verdict or {}
        final = verdict.get("t") == "finish" or verdict.get("final", True)
        if final or attempt.outcome.launcher_signal is not None:
            self.finished = True  # signalled: it leaves, the others await its replacement

    # -- preparing ------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Stage in (in a thread, the loop going on), then tell the job this node is ready."""
        preparation = self.options.prepare
        if preparation is None:
            self.link.report({"t": "ready", "attempt": -1})
            return
        self.preparing = PreparationThread(self.loop, preparation, self._prepared)
        self.preparing.start()

    def _prepared(self, error: Optional[BaseException]) -> None:
        thread, self.preparing = self.preparing, None
        assert thread is not None and self.options.prepare is not None
        name = self.options.prepare.name
        if self.finished:  # a signal, or the job stopped meanwhile: that is the outcome
            signum = self.outcomes[-1].launcher_signal if self.outcomes else None
            if thread.cancelled and signum is not None:
                logger.info(f"{name} stopped by {signal.Signals(signum).name}")
            return
        if error is None:
            self.link.report({"t": "ready", "attempt": -1})
            return
        code = error.exit_code if isinstance(error, MalaunchError) else ExitCode.SOFTWARE
        failure = {"kind": name, "node": self.node, "rank": None, "code": int(code)}
        failure["reason"] = str(error)[:500]
        self.link.report({"t": "failed", "attempt": -1, "failure": failure})
        # This launcher ends with the error once the job's stop comes back (next round on
        # node 0): leaving now would close the channel before node 0 told the others.
        self.error = error

    # -- the job's commands ---------------------------------------------------------------

    def _on_command(self, message: Message) -> None:
        kind = message.get("t")
        if kind == "prepare":
            if not self.finished and not self.prepared:
                self.prepared = True
                self._prepare()
            elif self.prepared and self.preparing is None and self.error is None:
                # A replacement joined (or a new node 0): this node has prepared already.
                self.link.report({"t": "ready", "attempt": self.link.attempt})
        elif kind == "start":
            self._start(message)
        elif self.attempt is not None:
            self.attempt.on_command(message)
        elif kind == "stop":
            self._between_attempts(message)

    def _between_attempts(self, stop: Message) -> None:
        if stop.get("final", True) or self.finished:
            self._stopped_between_attempts(stop)
        elif stop.get("replace") is not None:
            logger.warning(waiting_line(stop))  # a loss while the job restarts

    def _on_lost(self, reason: str) -> None:
        """Node 0's launcher is gone: this node stops as if node 0 had failed, and, while
        restarts remain, waits for node 0's replacement once its processes are down."""
        if self.finished:
            return
        stop = self.link.lose_node_0(reason)
        if self.attempt is not None:
            self.attempt.on_command({**stop, "attempt": self.attempt.number})
        else:
            self._between_attempts(stop)

    def _rejoin(self) -> None:
        """Redial node 0's replacement (the loop waits: nothing of this node runs now)."""
        try:
            self.link.rejoin(self._interrupted)
        except PeerError as exc:
            logger.error(str(exc))
            self._stopped_between_attempts(self.link.never_came_back())
            return
        if self.pending_signals:
            self._signalled_between_attempts(self.pending_signals[0])

    def _stopped_between_attempts(self, message: Message) -> None:
        if self.finished:
            return  # the first ending stands (a signal, then the stop it caused)
        self.finished = True
        self._cancel_preparation()
        failure = message.get("failure") or {}
        if self.error is not None:
            return  # this node's own failed preparation: its error is the line to show
        if failure.get("kind") == "absent":
            self.error = PeerError(
                f"node launchers {absent_nodes(failure)} never joined the job channel within "
                f"--wait-timeout (is malaunch started on every node, with the same --job-port?)"
            )
            return
        said = message.get("said")  # the job's decision, when there is one to say
        logger.warning(said if isinstance(said, str) else f"{describe_failure(failure)}: stopping")
        last = self.outcomes[-1] if self.outcomes else None
        if last is not None and last.children and (last.verdict or {}).get("final") is False:
            # The attempt that ended waiting for a replacement: this is how it ends.
            last.verdict = message
            last.losses = losses_of(message) or last.losses
        else:
            number = self.link.attempt
            self.outcomes.append(Outcome([], node=self.node, attempt=number, verdict=message))

    # -- attempts -------------------------------------------------------------------------

    def _start(self, message: Message) -> None:
        number = message.get("attempt")
        if self.attempt is not None and self.attempt.over():  # stop and start in one read:
            self._retire(self.attempt)  # dropping the start left this node waiting forever
        if not isinstance(number, int) or self.attempt is not None or self.finished:
            return
        self.started = True
        port = message.get("master_port")
        plan = self.plan
        if self.outcomes and losses_of(message):
            self.outcomes[-1].losses = losses_of(message)  # the attempt that ended lost them
        if number > 0 and self.replan is not None:
            port = port if isinstance(port, int) else None
            plan = self.replan(number, port, hosts_of(message))
        children, error = self._spawn(plan.processes, number)
        if self.options.say_start and error is None:
            say_started(number, children)
        group = Group(
            self.loop,
            children,
            self.reaper,
            self.options.grace_period,
            on_exit=lambda child: None,
            on_all_exited=self._kill_escaped,
            runlog=self.runlog,
        )
        self.runlog.attempt_started(number, children, self.loop.clock.wall())
        self.attempt = Attempt(
            self.loop,
            group,
            node=self.node,
            number=number,
            report=self.link.report,
            log_dir=self.options.log_dir,
            hang=self.options.hang,
            fail_fast=self.options.fail_fast,
            straggler_timeout=self.options.straggler_timeout,
            tail_lines=self.options.tail_lines,
            replace_lost=self._replace_lost(number),
        )
        if error is not None:
            self.attempt.abort(error)
        elif not any(not child.spec.service for child in children):
            self.attempt.workers_ended()  # a ps-only node: its workers are elsewhere
        group.reap()  # exits that happened while signals were blocked

    def _spawn(
        self, specs: Sequence[ProcessSpec], number: int, append: Optional[bool] = None
    ) -> Tuple[List[Child], Optional[LaunchError]]:
        return start_processes(
            specs,
            number=number,
            environ=self.options.environ,
            wakeup=self.wakeup,
            containment=self.containment,
            reaper=self.reaper,
            relay_of=self._relay,
            clock=self.options.clock,
            extra_env=runtime_env(self.options.hang, self.heartbeat),
            append=append,
        )

    def _replace_lost(self, number: int) -> Optional[Tuple[float, StartAgain]]:
        delay = self.options.replace_lost
        return None if delay is None else (delay, partial(self._start_again, number=number))

    def _start_again(self, child: Child, number: int) -> Tuple[List[Child], Optional[LaunchError]]:
        return self._spawn([child.spec], number, append=True)

    def _relay(self, spec: ProcessSpec) -> Optional[LineRelay]:
        if not self.selection.selects(spec):
            return None
        return relay_for(spec, self.plan.topology, self.options, self.console, self.deduper)

    # -- signals and heartbeats -----------------------------------------------------------

    def _on_signals(self) -> None:
        child_exited = False
        for signum in self.wakeup.read():
            if signum == signal.SIGCHLD:
                child_exited = True
            elif signum in self.wakeup.stopping:
                if self.attempt is not None:
                    self.attempt.on_launcher_signal(signum)
                else:
                    self._signalled_between_attempts(signum)
            elif self.attempt is not None:
                logger.info(f"forwarding {signal.Signals(signum).name} to every process group")
                self.attempt.group.signal_running(signum)
        if child_exited:
            if self.attempt is not None:
                self.attempt.group.reap()
            self.containment.reap(self._known())  # orphans of the job re-parented to us

    def _kill_escaped(self) -> None:
        self.containment.kill_escaped(self._known())

    def _known(self) -> List[int]:
        """The launcher's own children, whose exit status their Popen objects own."""
        pids = [c.pid for outcome in self.outcomes for c in outcome.children]
        if self.attempt is not None:
            pids += [c.pid for c in self.attempt.group.children]
        return pids + ([self.reaper.pid] if self.reaper.pid is not None else [])

    def _signalled_between_attempts(self, signum: int) -> None:
        if self.finished:
            # A second signal while a cancelled stage-in ends, or node 0 tells nodes that join
            # why the job ended: stop waiting for either (SPEC §6, a second signal escalates).
            self._abandon_preparation("a second signal")
            self.link.leave()
            return
        name = signal.Signals(signum).name
        logger.warning(f"received {name} while no process runs: stopping")
        code = ExitCode.for_signal(signum)
        failure = {"kind": "signal", "rank": None, "code": code, "signal": name}
        number = self.link.attempt
        self.link.report(
            {"t": "failed", "attempt": number, "failure": {**failure, "node": self.node}}
        )
        self._cancel_preparation()
        self.outcomes.append(
            Outcome([], node=self.node, launcher_signal=signum, verdict={"t": "stop"})
        )
        self.finished = True

    def _cancel_preparation(self) -> None:
        """Stop a stage-in in progress: the run ends once its thread has, or after
        :data:`CLOSE_WAIT` (a transfer stuck in a dead connection must not hold the launcher)."""
        if self.preparing is not None:
            self.preparing.cancel()
            self.loop.call_later(CLOSE_WAIT, lambda: self._abandon_preparation("not in time"))

    def _abandon_preparation(self, why: str) -> None:
        """Leave a cancelled stage-in's thread behind (a daemon: it ends with the launcher)."""
        if self.preparing is not None and self.finished:
            name = self.preparing.preparation.name
            logger.warning(f"{name} stopped ({why}): files in flight are left unfinished")
            self.preparing.abandon()
            self.preparing = None

    def _interrupted(self) -> bool:
        """While joining node 0: has a stopping signal come in? (Others have no process yet.)"""
        for signum in self.wakeup.read():
            if signum in self.wakeup.stopping:
                self.pending_signals.append(signum)
        return bool(self.pending_signals)

    def _on_beat(self, text: str) -> None:
        if self.attempt is not None:
            self.attempt.heard_beat(text)

    def _close(self) -> None:
        if self.preparing is not None:
            self.preparing.close()
        if self.deduper is not None:
            self.deduper.flush()
        if self.attempt is not None:
            self.attempt.group.kill()
            self.attempt.group.close()
        self.containment.close(self._known())
        self.runlog.close()
        self.link.close()
        if self.heartbeat is not None:
            self.heartbeat.close()
        self.loop.close()
