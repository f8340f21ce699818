"""When a failed job is started again: ``--max-restarts``, ``--restart-backoff``,
``--min-uptime``, ``--restart-on``.

A restart is job-wide: every node stops its group and all start the next attempt together
(the coordinator in :mod:`malaunch.job.coordinator` applies this policy). Pure functions and a
frozen policy object; randomness (the back-off's jitter) is injected.
"""

from __future__ import annotations

import dataclasses
import math
import random
import signal
from typing import Any, Callable, Dict, FrozenSet, Optional, Set, Tuple

from malaunch.errors import ExitCode, UsageError
from malaunch.numbers import MAX_SECONDS, parse_seconds
from malaunch.wording import spans

DEFAULT_BACKOFF = "1:30"
# How long the others wait for a lost node's replacement (docs/job.md says why): a pod on a
# new machine waits for the scheduler and pulls a training image of 10-20 GB, minutes.
DEFAULT_REJOIN_TIMEOUT = 600.0
# Failures that no restart can mend: the platform stopped this launcher, or a node is gone
# (both are *replaced* instead, while restarts remain: :func:`replacement`).
NEVER_RESTARTED = ("signal", "lost", "absent")
# A node launcher gone (killed, its machine lost) or stopped by its platform (evicted): its
# replacement may join the job in its place.
REPLACEABLE = ("lost", "signal")


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """``max_restarts`` restarts, ``backoff`` (base, max) seconds, failures after
    ``min_uptime`` seconds only, exit codes in ``restart_on`` only (None: any); a lost node's
    replacement is waited for up to ``rejoin_timeout`` seconds (0: never)."""

    max_restarts: int = 0
    backoff: Tuple[float, float] = (1.0, 30.0)
    min_uptime: float = 0.0
    restart_on: Optional[FrozenSet[int]] = None
    rejoin_timeout: float = DEFAULT_REJOIN_TIMEOUT


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the coordinator does about a failed attempt, and why: ``reason`` for the summary,
    ``said`` for every node's console (None: nothing worth a line, as without restarts)."""

    restart: bool
    delay: float
    reason: str
    said: Optional[str] = None

    def fields(self) -> Dict[str, Any]:
        """What a ``stop`` for a restart carries: the decision and delay for every node's
        summary, and what every node's console says (``said``)."""
        said = {"said": self.said} if self.said else {}
        return {"decision": self.reason, "delay": self.delay, **said}


def decide(
    policy: RestartPolicy,
    restarts_done: int,
    *,
    kind: str,
    code: Optional[int],
    uptime: float,
    uniform: Callable[[float, float], float] = random.uniform,
) -> Decision:
    """Restart or give up, for a failure of ``kind`` with exit ``code`` after ``uptime`` s."""
    if policy.max_restarts == 0:
        return Decision(False, 0.0, "no restarts allowed (--max-restarts 0)")
    if restarts_done >= policy.max_restarts:
        reason = f"--max-restarts {policy.max_restarts} used up"
        return Decision(False, 0.0, reason, f"no restart left: {reason}")
    if kind in NEVER_RESTARTED:
        reason = f"a failure of kind {kind!r} is never restarted"
        # A signalled launcher has said why it stops; a lost one has not.
        said = None if kind == "signal" else "no restart: a lost node launcher is not restarted"
        return Decision(False, 0.0, reason, said)
    if uptime < policy.min_uptime:
        why = f"failed after {uptime:.1f}s, before --min-uptime {policy.min_uptime:g}s"
        return Decision(False, 0.0, f"{why}: a start-up crash", f"no restart: {why}")
    if policy.restart_on is not None and code not in policy.restart_on:
        reason = f"exit code {code} is not in --restart-on"
        return Decision(False, 0.0, reason, f"no restart: {reason} {spans(policy.restart_on)}")
    delay = backoff_delay(policy.backoff, restarts_done + 1, uniform)
    reason = f"restart {restarts_done + 1} of {policy.max_restarts}"
    after = f"after a {delay:.1f}s back-off" if delay > 0 else "at once"
    return Decision(True, delay, reason, f"{reason} {after}")


def replacement(policy: RestartPolicy, restarts_done: int, node: int) -> Decision:
    """Wait for a replacement of lost node ``node`` (the next attempt counts as a restart,
    started as soon as it has joined: no back-off), or end the job. Node 0's coordinator
    decides this for a lost node, and the other nodes alike for a lost node 0."""
    if policy.rejoin_timeout <= 0:
        reason = "--rejoin-timeout 0: a lost node is not replaced"
        return Decision(
            False, 0.0, reason, f"no restart: {reason}" if policy.max_restarts else None
        )
    if policy.max_restarts == 0:
        return Decision(False, 0.0, "no restarts allowed (--max-restarts 0)")
    if restarts_done >= policy.max_restarts:
        reason = f"--max-restarts {policy.max_restarts} used up"
        return Decision(False, 0.0, reason, f"no restart left: {reason}")
    # (said by every node from the stop that waits: "node 1 lost: waiting up to 300s ...")
    waiting = f"waiting up to {policy.rejoin_timeout:g}s for node {node}'s replacement"
    return Decision(True, 0.0, f"restart {restarts_done + 1} of {policy.max_restarts}: {waiting}")


def backoff_delay(
    backoff: Tuple[float, float], restart: int, uniform: Callable[[float, float], float]
) -> float:
    """Exponential back-off with jitter: ``min(max, base * 2**(n-1))``, of which a random
    half, so that many jobs restarted by one outage do not come back in lock-step."""
    base, most = backoff
    if base <= 0:
        return 0.0
    full = min(most, base * 2.0 ** min(restart - 1, 60))
    return full / 2 + uniform(0.0, full / 2)


def parse_backoff(text: str) -> Tuple[float, float]:
    """``--restart-backoff BASE[:MAX]`` in seconds (MAX defaults to 30 times BASE); each part
    is a duration as :func:`~malaunch.numbers.parse_seconds` takes it (ASCII, finite, at most
    a week: ``time.sleep`` overflows past 24.8 days, at the first restart)."""
    base_text, sep, most_text = text.partition(":")
    try:
        base = parse_seconds(base_text, "BASE")
        most = parse_seconds(most_text, "MAX") if sep else min(base * 30, MAX_SECONDS)
    except UsageError:
        base = most = math.nan
    if math.isnan(base) or most < base:
        msg = (
            f"--restart-backoff {text!r}: expected BASE[:MAX] seconds with "
            f"0 <= BASE <= MAX <= {MAX_SECONDS:g}"
        )
        raise UsageError(msg)
    return base, most


def parse_codes(text: str) -> Optional[FrozenSet[int]]:
    """``--restart-on``: ``any``, or exit codes, ranges and signal names (``1,70-79,SIGKILL``,
    a signal N standing for 128+N). A blank value (``' '``, a shell variable that expanded to
    spaces) names no code: refused, never read as ``any``."""
    if text.strip().lower() in ("any", "all"):
        return None
    codes: Set[int] = set()
    for item in (part.strip() for part in text.split(",")):
        codes.update(_codes_of(text, item))
    return frozenset(codes)


def _codes_of(text: str, item: str) -> range:
    if item.upper() in signal.Signals.__members__:  # real signals only, not SIG_DFL & co.
        code = ExitCode.for_signal(int(signal.Signals[item.upper()]))
        return range(code, code + 1)
    low, sep, high = item.partition("-")
    if _is_code(low) and (not sep or _is_code(high)):
        first, last = int(low), int(high if sep else low)
        if first <= last:
            return range(first, last + 1)
    msg = f"--restart-on {text!r}: expected any, or exit codes like 1,70-79,SIGKILL (got {item!r})"
    raise UsageError(msg)


def _is_code(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 3 and int(text) <= 255
