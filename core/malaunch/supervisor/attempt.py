"""One attempt on this node: what its exits mean, what the node tells the job, and what it
does when the job says so.

Local rules (torch ``PContext``, SPEC §6): the first process, worker or service, that exits
non-zero or dies of a signal is this node's failure: every other process group gets SIGTERM
at once (SIGKILL after the grace period) and the job is told. A service that exits 0 on its
own is simply done (a MindSpore scheduler does so once every worker has unregistered). When
every local worker has succeeded the job is told ``done``; services keep running until the
job says ``finish`` (their workers may be on other nodes). A chief that exits 0 is said to
the job (``chief``), which then finishes under the ``chief`` success policy. A terminating
launcher signal is forwarded to every group, and a second one sends SIGKILL at once.

Job commands: ``stop`` (another node failed, or a restart), ``finish``, ``capture`` (print
your ranks' stacks, see :mod:`malaunch.supervisor.capture`).
"""

from __future__ import annotations

import signal
from typing import Any, Callable, Dict, List, Optional, Tuple

from malaunch.errors import ExitCode, LaunchError
from malaunch.events import EventLoop, Timer
from malaunch.hang.watch import HangSettings, HangWatch, Watched
from malaunch.job.protocol import Message
from malaunch.job.replacement import absent_nodes
from malaunch.job.success import CHIEF_ROLE
from malaunch.log import logger
from malaunch.stopping import TERMINATING, signal_name
from malaunch.supervisor.capture import StackCapture
from malaunch.supervisor.group import Group
from malaunch.supervisor.outcome import Outcome, failure_of, how_it_ended
from malaunch.supervisor.output import describe
from malaunch.supervisor.spawn import Child
from malaunch.wording import plural

Report = Callable[[Message], None]
StartAgain = Callable[[Child], Tuple[List[Child], Optional[LaunchError]]]


class Attempt:
    """The policy over one attempt's :class:`Group`."""

    def __init__(
        self,
        loop: EventLoop,
        group: Group,
        *,
        node: int,
        number: int,
        report: Report,
        log_dir: str,
        hang: Optional[HangSettings] = None,
        fail_fast: bool = True,
        straggler_timeout: Optional[float] = None,
        tail_lines: int = 20,
        replace_lost: Optional[Tuple[float, StartAgain]] = None,
    ) -> None:
        self.loop = loop
        self.group = group
        self.node = node
        self.number = number
        self.report_to_job = report
        self.log_dir = log_dir
        self.fail_fast = fail_fast
        self.straggler_timeout = straggler_timeout
        self.tail_lines = tail_lines
        self.replace_lost = replace_lost
        self.outcome = Outcome(group.children, node=node, attempt=number)
        self.stopping = False
        self.failure_said = False  # simulate: the one error line of a node failure is out
        self.done_reported = False
        self.failure_reported = False
        self.ended_reported = False
        self.launcher_signals = 0
        self.safety_timer: Optional[Timer] = None
        self.capture: Optional[StackCapture] = None
        self.watch: Optional[HangWatch] = None
        group.on_exit = self._on_exit
        if hang is not None:
            self.watch = HangWatch(loop, hang, group.children, self._on_hang)
        self.hang_settings = hang

    # -- what the node's loop asks ----------------------------------------------------------

    def over(self) -> bool:
        """The group is down and the job has said what it makes of this attempt."""
        return self.group.finished() and self.outcome.verdict is not None

    def tick(self) -> None:
        """After each round of events: report ``ended`` once the group is down after a stop."""
        if self.group.finished() and self.stopping and not self.ended_reported:
            self.ended_reported = True
            self._report({"t": "ended"})

    def abort(self, error: LaunchError) -> None:
        """A process of the plan could not be started: stop those that were, fail the job."""
        self.outcome.launch_error = error
        self.stopping = True
        self.group.stop(signal.SIGTERM)
        code = int(error.exit_code)
        self._fail({"kind": "launch", "rank": None, "role": None, "code": code, "signal": None})

    # -- local events ---------------------------------------------------------------------

    def _on_exit(self, child: Child) -> None:
        returncode = child.returncode
        assert returncode is not None
        if self.stopping or self.capture is not None:
            return  # expected: the job stops, or faulthandler was asked for the stacks
        if self._replaced(child, returncode):
            return
        if not self.fail_fast and not child.spec.service:
            # simulate: the node launchers stop themselves; this only catches those that don't
            self._arm_safety_net()
        if returncode != 0:
            self._local_failure(child, returncode)
            return
        if child.spec.role == CHIEF_ROLE and not child.spec.service:
            self._report({"t": "chief"})  # the job may have succeeded (success policy chief)
        if not any(c.running for c in self.group.children if not c.spec.service):
            self.workers_ended()

    def _local_failure(self, child: Child, returncode: int) -> None:
        if not self.fail_fast:
            self._independent_failure(child, returncode)
            return
        if self.outcome.first_failure is not None:
            return
        self.outcome.first_failure = child
        others = len(self.group.running())
        stopping = f"; stopping {plural(others, 'other process')}" if others else ""
        logger.error(
            f"{describe(child.spec)} (pid {child.pid}) {how_it_ended(returncode)}{stopping}"
        )
        self.stopping = True
        self.group.stop(signal.SIGTERM)
        self._fail(failure_of(child, self.tail_lines))

    def _replaced(self, child: Child, returncode: int) -> bool:
        """``simulate --replace-lost``: a node launcher killed by a signal while the others
        run is started again after the delay, as a kubelet restarts a container."""
        others = [c for c in self.group.running() if not c.spec.service]
        if self.replace_lost is None or returncode >= 0 or not others:
            return False
        delay, start_again = self.replace_lost
        logger.warning(
            f"{describe(child.spec)} (pid {child.pid}) {how_it_ended(returncode)}: starting "
            f"it again in {delay:g}s (--replace-lost)"
        )
        self.loop.call_later(delay, lambda: self._start_again(child, start_again))
        return True

    def _start_again(self, child: Child, start_again: StartAgain) -> None:
        if self.stopping or not self.group.running():
            return  # the job ended meanwhile: nothing to rejoin
        started, error = start_again(child)
        if error is not None:
            logger.error(str(error))
        for new in started:
            self.group.add(new)

    def _independent_failure(self, child: Child, returncode: int) -> None:
        """simulate's node launchers: nobody is stopped; the first failure of a node's own
        wins over one that only says another node failed (exit 75). Only the failure that wins
        is an error line: every node of a job may fail alike (a rank table never ready)."""
        first = self.outcome.first_failure
        own = returncode != ExitCode.PEER_FAILED
        wins = first is None or (first.returncode == ExitCode.PEER_FAILED and own)
        said = logger.error if wins and own and not self.failure_said else logger.warning
        self.failure_said = self.failure_said or said is logger.error
        said(f"{describe(child.spec)} (pid {child.pid}) {how_it_ended(returncode)}")
        if wins:
            self.outcome.first_failure = child
        self.workers_ended()

    def workers_ended(self) -> None:
        """Every local worker has exited: report the first failure, or that all succeeded."""
        if any(c.running for c in self.group.children if not c.spec.service):
            return
        failure = self.outcome.first_failure
        if failure is not None:
            self._fail(failure_of(failure, self.tail_lines))
        elif not self.done_reported:
            self.done_reported = True
            workers = sum(1 for c in self.group.children if not c.spec.service)
            self._report({"t": "done", "workers": workers})

    def on_launcher_signal(self, signum: int) -> None:
        self.launcher_signals += 1
        running = len(self.group.running())
        if self.launcher_signals > 1:
            logger.warning(
                f"second signal ({signal_name(signum)}): killing {plural(running, 'process')}"
            )
            self.group.kill()
            return
        if self.outcome.first_failure is None:
            self.outcome.launcher_signal = signum
        if signum in TERMINATING:
            logger.warning(f"received {signal_name(signum)}: stopping {plural(running, 'process')}")
            self.group.stop(signum)
        else:  # a signal that would have killed the launcher, not one to pass on
            logger.warning(
                f"received {signal_name(signum)} (not in --forward-signals): stopping "
                f"{plural(running, 'process')} with SIGTERM"
            )
            self.group.stop(signal.SIGTERM)
        self.stopping = True
        code = ExitCode.for_signal(signum)
        self._fail(
            {
                "kind": "signal",
                "rank": None,
                "role": None,
                "code": code,
                "signal": signal_name(signum),
            }
        )

    def heard_beat(self, text: str) -> None:
        """A ``malaunch.context.heartbeat()`` from rank ``text`` (or the only worker)."""
        children = [c for c in self.group.children if c.running and not c.spec.service]
        chosen = [c for c in children if str(c.spec.rank) == text] or (
            children if len(children) == 1 else []
        )
        now = self.loop.now()
        for child in chosen:
            child.last_activity = now
            child.heard_from = True

    def _on_hang(self, child: Watched, seconds: float) -> None:
        assert isinstance(child, Child)
        if self.stopping:
            return
        record: Dict[str, Any] = {
            "rank": child.spec.rank,
            "role": child.spec.role,
            "seconds_silent": round(seconds, 2),
            "detected_at": self.loop.clock.wall(),
        }
        self.outcome.hang_detected = record
        logger.error(
            f"{describe(child.spec)} (pid {child.pid}) has been silent for {seconds:.1f}s "
            f"(--hang-timeout): capturing the stacks of every rank"
        )
        self._report({"t": "hang", "hang": record})

    # -- the job's commands ---------------------------------------------------------------

    def on_command(self, message: Message) -> None:
        kind = message.get("t")
        if kind == "capture":
            self._capture(message)
        elif kind in ("stop", "finish"):
            if self.outcome.verdict is not None:
                return  # the first verdict stands (node 0 leaving after it is no news)
            self.outcome.verdict = message
            if self.watch is not None:
                self.watch.stop()
            self._obey(message)

    def _obey(self, message: Message) -> None:
        if kind_is(message, "finish"):
            left = self.group.running()
            if left and not self.stopping:
                decision = message.get("decision") or "every worker of the job succeeded"
                what = "service process" if all(c.spec.service for c in left) else "process"
                logger.info(f"{decision}; stopping {plural(len(left), what)}")
        elif not self.stopping:
            failure = message.get("failure") or {}
            running = len(self.group.running())
            if message.get("replace") is not None:
                logger.warning(f"{waiting_line(message)}{_local(running, 'stopping')}")
            elif running:
                logger.warning(f"{describe_failure(failure)}: stopping{_local(running)}")
            elif message.get("final") is False:  # (a final stop: the summary says why)
                logger.warning(describe_failure(failure))
        if isinstance(message.get("said"), str):
            logger.warning(message["said"])  # the job's decision: restart, or why not
        if not self.stopping or kind_is(message, "finish"):
            self.stopping = True
            self.group.stop(signal.SIGTERM)

    def _capture(self, message: Message) -> None:
        if self.capture is not None:
            return
        method = self.hang_settings.stacks if self.hang_settings is not None else "auto"
        self.capture = StackCapture(
            self.loop,
            self.group,
            node=self.node,
            attempt=self.number,
            log_dir=self.log_dir,
            method=method,
            on_ready=self._stacks_ready,
        )
        self.capture.start()

    def _stacks_ready(self, entries: List[Dict[str, Any]]) -> None:
        self._report({"t": "stacks", "ranks": entries})

    # -- helpers --------------------------------------------------------------------------

    def _fail(self, failure: Dict[str, Any]) -> None:
        if self.failure_reported:
            return
        self.failure_reported = True
        self._report({"t": "failed", "failure": {**failure, "node": self.node}})

    def _report(self, message: Message) -> None:
        self.report_to_job({**message, "attempt": self.number})

    def _arm_safety_net(self) -> None:
        if self.straggler_timeout is None or self.safety_timer is not None:
            return
        self.safety_timer = self.loop.call_later(self.straggler_timeout, self._safety_net)

    def _safety_net(self) -> None:
        running = self.group.running()
        if not running:
            return
        names = ", ".join(describe(child.spec) for child in running)
        itself, them = ("itself", "it") if len(running) == 1 else ("themselves", "them")
        logger.error(
            f"{names} did not stop by {itself} within {self.straggler_timeout:g}s of the "
            f"first exit of another; stopping {them}"
        )
        self.outcome.safety_net = True
        self.group.stop(signal.SIGTERM)


def kind_is(message: Message, kind: str) -> bool:
    return message.get("t") == kind


def _local(running: int, verb: str = "") -> str:
    """`` (2 local processes)`` (with ``verb``: ``; stopping 2 local processes``); nothing
    when none is left to stop."""
    if running == 0:
        return ""
    processes = plural(running, "local process")
    return f"; {verb} {processes}" if verb else f" ({processes})"


def waiting_line(message: Message) -> str:
    """``node 3 lost: waiting up to 300s for its replacement``, from a ``stop`` that waits."""
    failure = message.get("failure") or {}
    node = message.get("replace")
    gone = f"node {node} lost" if failure.get("kind") == "lost" else describe_failure(failure)
    timeout = message.get("rejoin_timeout")
    limit = f"up to {timeout:g}s " if isinstance(timeout, (int, float)) else ""
    return f"{gone}: waiting {limit}for its replacement"


def describe_failure(failure: Dict[str, Any]) -> str:
    """``node 1 rank 3 exited with code 7`` and friends, for logs."""
    node, kind, role = failure.get("node"), failure.get("kind"), failure.get("role")
    where = f"node {node}"
    if role == "node":
        # The simulate parent's processes are node launchers: "node 0 node 1" said nothing.
        where = f"node {failure.get('rank')}"
    elif failure.get("rank") is not None:
        where += f" {'rank' if role in (None, 'worker') else role} {failure.get('rank')}"
    ending = f"exited with code {failure.get('code')}"
    if failure.get("signal") and kind == "exit":
        ending = f"was killed by {failure.get('signal')}"
    phrases = {
        "lost": f"node {node}'s launcher was lost",
        "absent": f"nodes {absent_nodes(failure)} never joined the job",
        "hang": f"{where} hung (--hang-timeout)",
        "signal": f"{where}'s launcher received {failure.get('signal')}",
        "launch": f"{where} could not start a process",
        "stage-in": f"{where}'s stage-in failed with exit code {failure.get('code')}",
        # malaunch.supervisor.prestart: it could not plan, or set up what the start needs
        "prestart": f"{where}'s launcher failed before the start with exit code "
        f"{failure.get('code')}: {failure.get('reason')}",
    }
    return phrases.get(str(kind), f"{where} {ending}")
