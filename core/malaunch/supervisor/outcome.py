"""How an attempt ended on this node, and the exit code that follows (SPEC §3).

The node's own first failure wins (its worker's code, 128+N for signal N); then a hang this
node detected (124); then a signal to the launcher itself (128+N); then being stopped because
another node failed or vanished (75); a start failure is 71, and a job whose node launchers
had to be stopped by ``simulate``'s safety net is 70.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Optional

from malaunch.errors import ExitCode, LaunchError
from malaunch.job.protocol import MAX_MESSAGE, Message
from malaunch.stopping import signal_name
from malaunch.supervisor.errorfile import read_error_file
from malaunch.supervisor.spawn import Child
from malaunch.supervisor.tail import log_tail

# What a failure may take of a job channel message, the rest being the message around it.
REPORT_BUDGET = MAX_MESSAGE * 3 // 4


def how_it_ended(returncode: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL``."""
    if returncode < 0:
        return f"was killed by {signal_name(-returncode)}"
    return f"exited with code {returncode}"


def exit_code_of(returncode: int) -> int:
    """A process's return code as a shell reports it: 128+N for signal N."""
    return ExitCode.for_signal(-returncode) if returncode < 0 else returncode


def failure_of(child: Child, tail_lines: int = 0) -> Dict[str, Any]:
    """The job channel's description of a failed process (its node is added by the sender):
    with ``tail_lines``, its log's last lines and its Python exception, and the structured
    error of its error file (``@record``), for every node's summary."""
    returncode = child.returncode if child.returncode is not None else 0
    tail, exception = log_tail(child.spec.log_file, tail_lines)
    error = read_error_file(child.spec.error_file)
    failure = {
        "kind": "exit",
        "rank": child.spec.rank,
        "role": child.spec.role,
        "code": exit_code_of(returncode),
        "signal": signal_name(-returncode) if returncode < 0 else None,
        "log_file": child.spec.log_file,
        "tail": tail,
        "exception": exception,
        "error": error,
    }
    return fit_report(failure)


def _encoded(failure: Dict[str, Any]) -> int:
    """The bytes ``failure`` takes in a job channel message (ASCII JSON: \\uXXXX escapes)."""
    return len(json.dumps(failure, separators=(",", ":"), ensure_ascii=True))


def fit_report(failure: Dict[str, Any], budget: int = REPORT_BUDGET) -> Dict[str, Any]:
    """``failure`` cut to fit one job channel message: the exception's first lines go first,
    then the tail's, since a traceback ends with what failed. 20 lines of 400 characters fit
    easily, but a traceback of 64 KiB of non-ASCII text (each character six bytes as JSON)
    would not, and the failure could then not be told at all."""
    fitted = dict(failure)
    while _encoded(fitted) > budget:
        exception, tail = fitted.get("exception"), fitted.get("tail") or []
        if exception:
            lines = exception.splitlines()
            fitted["exception"] = "\n".join(lines[len(lines) // 2 + 1 :]) or None
        elif tail:
            fitted["tail"] = tail[len(tail) // 2 + 1 :]
        else:
            break  # the rest is small and bounded (the error file's fields are cut)
    return fitted


@dataclasses.dataclass
class Outcome:
    """An attempt on this node: its processes, what went wrong first, what the job decided."""

    children: List[Child]
    node: int = 0
    attempt: int = 0
    first_failure: Optional[Child] = None
    launcher_signal: Optional[int] = None
    launch_error: Optional[LaunchError] = None
    hang_detected: Optional[Dict[str, Any]] = None
    verdict: Optional[Message] = None  # the job's "stop" or "finish" for this attempt
    safety_net: bool = False
    losses: List[Dict[str, Any]] = dataclasses.field(default_factory=list)  # nodes it lost

    @property
    def job_failure(self) -> Optional[Dict[str, Any]]:
        """The first failure of the whole job, as the coordinator announced it."""
        if self.verdict is None or self.verdict.get("t") != "stop":
            return None
        failure = self.verdict.get("failure")
        return failure if isinstance(failure, dict) else None

    @property
    def hang(self) -> Optional[Dict[str, Any]]:
        failure = self.job_failure
        if failure is not None and failure.get("kind") == "hang":
            hang = failure.get("hang")
            return hang if isinstance(hang, dict) else None
        return None

    @property
    def exit_code(self) -> int:
        """The node's exit code, in the order of the module docstring."""
        if self.launch_error is not None:
            return int(self.launch_error.exit_code)
        if self.first_failure is not None:
            return exit_code_of(self.first_failure.returncode or 0)
        return self._job_code()

    def _job_code(self) -> int:
        failure = self.job_failure or {}
        if failure.get("kind") == "hang" and failure.get("node") == self.node:
            return int(ExitCode.HANG)
        if self.launcher_signal is not None:
            return ExitCode.for_signal(self.launcher_signal)
        if failure:
            return int(ExitCode.PEER_FAILED)
        return int(ExitCode.SOFTWARE) if self.safety_net else 0
