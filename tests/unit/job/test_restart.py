"""The restart policy: decide(), the back-off and the option parsers."""

from __future__ import annotations

import math
from typing import List, Optional, Tuple

import pytest

from malaunch.errors import UsageError
from malaunch.job.restart import (
    NEVER_RESTARTED,
    Decision,
    RestartPolicy,
    backoff_delay,
    decide,
    parse_backoff,
    parse_codes,
)


class Recorder:
    """An injected ``uniform`` that records its bounds and returns a fixed share of them."""

    def __init__(self, share: float = 0.0) -> None:
        self.share = share
        self.calls: List[Tuple[float, float]] = []

    def __call__(self, low: float, high: float) -> float:
        self.calls.append((low, high))
        return low + (high - low) * self.share


def no_random(low: float, high: float) -> float:
    raise AssertionError("uniform must not be called when nothing is restarted")


def test_no_restarts_allowed() -> None:
    verdict = decide(RestartPolicy(), 0, kind="exit", code=1, uptime=100.0, uniform=no_random)
    # nothing to say on the console: no restart was asked for
    assert verdict == Decision(False, 0.0, "no restarts allowed (--max-restarts 0)", None)


@pytest.mark.parametrize("done", [2, 3])
def test_restarts_used_up(done: int) -> None:
    policy = RestartPolicy(max_restarts=2)
    verdict = decide(policy, done, kind="exit", code=1, uptime=100.0, uniform=no_random)
    reason = "--max-restarts 2 used up"
    assert verdict == Decision(False, 0.0, reason, f"no restart left: {reason}")


@pytest.mark.parametrize("kind", NEVER_RESTARTED)
def test_kinds_never_restarted(kind: str) -> None:
    policy = RestartPolicy(max_restarts=5)
    verdict = decide(policy, 0, kind=kind, code=1, uptime=100.0, uniform=no_random)
    # a signalled launcher says so itself
    said = None if kind == "signal" else "no restart: a lost node launcher is not restarted"
    assert verdict == Decision(False, 0.0, f"a failure of kind {kind!r} is never restarted", said)


def test_never_restarted_kinds() -> None:
    assert set(NEVER_RESTARTED) == {"signal", "lost", "absent"}


def test_failure_before_min_uptime_is_a_start_up_crash() -> None:
    policy = RestartPolicy(max_restarts=5, min_uptime=10.0)
    verdict = decide(policy, 0, kind="exit", code=1, uptime=2.34, uniform=no_random)
    assert verdict == Decision(
        False,
        0.0,
        "failed after 2.3s, before --min-uptime 10s: a start-up crash",
        "no restart: failed after 2.3s, before --min-uptime 10s",
    )


def test_failure_at_min_uptime_is_restarted() -> None:
    policy = RestartPolicy(max_restarts=5, min_uptime=10.0, backoff=(0.0, 0.0))
    verdict = decide(policy, 0, kind="exit", code=1, uptime=10.0, uniform=no_random)
    assert verdict == Decision(True, 0.0, "restart 1 of 5", "restart 1 of 5 at once")


@pytest.mark.parametrize("code", [0, 2, 137, None])
def test_code_not_in_restart_on(code: Optional[int]) -> None:
    policy = RestartPolicy(max_restarts=5, restart_on=frozenset({1, 70}))
    verdict = decide(policy, 0, kind="exit", code=code, uptime=100.0, uniform=no_random)
    reason = f"exit code {code} is not in --restart-on"
    assert verdict == Decision(False, 0.0, reason, f"no restart: {reason} 1,70")


def test_restart_with_delay_from_the_injected_uniform() -> None:
    policy = RestartPolicy(max_restarts=3, backoff=(2.0, 30.0), restart_on=frozenset({70}))
    uniform = Recorder(share=0.5)
    verdict = decide(policy, 1, kind="exit", code=70, uptime=100.0, uniform=uniform)
    # Restart 2: full = 2 * 2**1 = 4; half of it fixed, half from uniform(0, 2) -> 1.
    assert verdict == Decision(True, 3.0, "restart 2 of 3", "restart 2 of 3 after a 3.0s back-off")
    assert uniform.calls == [(0.0, 2.0)]


def test_restart_on_none_restarts_any_code() -> None:
    policy = RestartPolicy(max_restarts=1, backoff=(1.0, 30.0))
    verdict = decide(policy, 0, kind="hang", code=124, uptime=0.0, uniform=Recorder())
    assert verdict == Decision(True, 0.5, "restart 1 of 1", "restart 1 of 1 after a 0.5s back-off")


# -- backoff_delay ------------------------------------------------------------------------


def test_backoff_is_exponential_and_capped() -> None:
    top = Recorder(share=1.0)  # the largest delay: the whole of full
    fulls = [backoff_delay((1.0, 10.0), n, top) for n in range(1, 7)]
    assert fulls == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    bottom = Recorder(share=0.0)  # the smallest delay: half of full
    halves = [backoff_delay((1.0, 10.0), n, bottom) for n in range(1, 7)]
    assert halves == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert bottom.calls == [(0.0, 0.5), (0.0, 1.0), (0.0, 2.0), (0.0, 4.0), (0.0, 5.0), (0.0, 5.0)]


def test_backoff_base_zero_is_no_delay() -> None:
    assert backoff_delay((0.0, 30.0), 1, no_random) == 0.0
    assert backoff_delay((0.0, 0.0), 50, no_random) == 0.0


@pytest.mark.parametrize("restart", [61, 1000, 10**9])
def test_large_restart_numbers_do_not_overflow(restart: int) -> None:
    assert backoff_delay((1.0, 30.0), restart, Recorder(share=1.0)) == 30.0
    delay = backoff_delay((1e300, 1e308), restart, Recorder(share=1.0))
    assert math.isfinite(delay)
    assert delay == 1e308


# -- parse_backoff ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", (1.0, 30.0)), ("1:30", (1.0, 30.0)), ("0:0", (0.0, 0.0)), ("0.5:2", (0.5, 2.0))],
)
def test_parse_backoff(text: str, expected: Tuple[float, float]) -> None:
    assert parse_backoff(text) == expected


@pytest.mark.parametrize(
    "text",
    ["x", "-1", "5:1", "nan", "inf", "1:inf", "1:", ":1", "1:x", "", "1_0", " 1", "1e300",
     "2200000", "1:1e300", "\u0663"],
)  # fmt: skip
def test_parse_backoff_rejects(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_backoff(text)
    expected = (
        f"--restart-backoff {text!r}: expected BASE[:MAX] seconds with 0 <= BASE <= MAX <= 604800"
    )
    assert str(caught.value) == expected


# -- parse_codes --------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["any", "ANY", " all "])
def test_parse_codes_any(text: str) -> None:
    assert parse_codes(text) is None


@pytest.mark.parametrize("text", ["", " ", "\t", " , "])
def test_a_blank_restart_on_names_no_code_and_is_refused(text: str) -> None:
    # It was read as "any": a restart on every code, which nobody typed.
    with pytest.raises(UsageError, match=r"^--restart-on .*: expected any, or exit codes like"):
        parse_codes(text)


def test_parse_codes_list_ranges_and_signals() -> None:
    assert parse_codes("1,70-79,SIGKILL") == frozenset({1, *range(70, 80), 137})
    assert parse_codes(" 3 , sigterm ") == frozenset({3, 143})
    assert parse_codes("255,0-0") == frozenset({255, 0})


@pytest.mark.parametrize(
    "item", ["x", "256", "-1", "5-1", "1-", "1-300", "SIGNOPE", "", "1.5", "+1", "0x1"]
)
def test_parse_codes_rejects(item: str) -> None:
    text = f"1,{item}"
    with pytest.raises(UsageError) as caught:
        parse_codes(text)
    expected = (
        f"--restart-on {text!r}: expected any, or exit codes like 1,70-79,SIGKILL (got {item!r})"
    )
    assert str(caught.value) == expected


@pytest.mark.parametrize("name", ["SIG_DFL", "SIG_IGN", "SIG_SETMASK"])
def test_parse_codes_rejects_names_that_are_not_signals(name: str) -> None:
    # signal.SIG_DFL and friends are ints (handler and mask constants), not signal numbers.
    with pytest.raises(UsageError):
        parse_codes(name)
