"""Signals to the launcher (sent to this process from a helper thread while supervise() runs)."""

from __future__ import annotations

import os
import signal
from typing import Any, List

import pytest
from jobs import Job

import malaunch.supervisor.starting
from malaunch.errors import UsageError
from malaunch.supervisor.signals import parse_signal_names
from malaunch.supervisor.spawn import spawn


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_launcher_signal_is_forwarded_and_gives_128_plus_n(job: Job, signum: int) -> None:
    specs = [job.spec(rank, "--sleep", "60", "--child") for rank in range(3)]
    sender = job.signal_after_start(3, signum)
    assert job.run(job.plan(*specs)) == 128 + signum
    sender.join()
    summary = job.summary()
    assert summary["first_failure"] is None
    # The same signal reached every worker (Python re-raises an unhandled SIGINT on exit).
    assert {p["signal"] for p in summary["processes"]} == {signal.Signals(signum).name}
    job.assert_all_gone(expected_at_least=6)


def test_second_signal_kills_at_once(job: Job, messages: List[str]) -> None:
    specs = [job.spec(rank, "--sleep", "60", "--ignore-term", "--child") for rank in range(2)]
    sender = job.signal_after_start(2, signal.SIGTERM, signal.SIGTERM)
    # The grace period is far longer than the test timeout: only the escalation can end it.
    assert job.run(job.plan(*specs), grace_period=3600) == 128 + signal.SIGTERM
    sender.join()
    assert {p["signal"] for p in job.summary()["processes"]} == {"SIGKILL"}
    assert any("second signal" in m for m in messages)
    job.assert_all_gone(expected_at_least=4)


def test_configured_signal_is_only_forwarded(job: Job) -> None:
    marks = [job.root / f"usr1-{rank}" for rank in range(2)]
    specs = [
        job.spec(rank, "--on-usr1", str(marks[rank]), "--wait-files", str(marks[rank]))
        for rank in range(2)
    ]
    sender = job.signal_after_start(2, signal.SIGUSR1)
    assert job.run(job.plan(*specs), forward_signals=(signal.SIGUSR1,)) == 0
    sender.join()
    assert all(mark.exists() for mark in marks)


def test_signal_while_spawning_32_leaves_nothing(job: Job, monkeypatch: Any) -> None:
    """A SIGTERM that arrives after the 16th of 32 processes started: all 32 are stopped."""
    started: List[int] = []

    def spawn_and_signal(*args: Any, **kwargs: Any) -> Any:
        child = spawn(*args, **kwargs)
        started.append(child.pid)
        if len(started) == 16:
            os.kill(os.getpid(), signal.SIGTERM)
        return child

    monkeypatch.setattr(malaunch.supervisor.starting, "spawn", spawn_and_signal)
    specs = [job.spec(rank, "--sleep", "60") for rank in range(32)]
    assert job.run(job.plan(*specs)) == 128 + signal.SIGTERM
    processes = job.summary()["processes"]
    assert [p["pid"] for p in processes] == started
    assert len(started) == 32
    job.assert_all_gone(expected_at_least=32)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, 0, 999])
def test_signals_that_cannot_be_forwarded_are_a_usage_error(job: Job, signum: int) -> None:
    with pytest.raises(UsageError, match="--forward-signals: signal"):
        job.run(job.plan(job.spec(0)), forward_signals=(signum,))
    assert job.pid_files() == 0


@pytest.mark.parametrize("name", ["SIG_SETMASK", "SIG_DFL", "SIG_IGN", "NOPE", "sigterm2"])
def test_forward_signals_accepts_real_signal_names_only(name: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_signal_names(f"SIGTERM,{name}")
    assert str(info.value) == f"--forward-signals: unknown signal {name.upper()!r}"


def test_forward_signals_names_with_or_without_sig() -> None:
    assert parse_signal_names("term, usr1,SIGHUP") == (
        signal.SIGTERM,
        signal.SIGUSR1,
        signal.SIGHUP,
    )


@pytest.mark.parametrize("name", ["SIGKILL", "stop", "SIGCHLD"])
def test_forward_signals_refuses_what_cannot_be_forwarded(name: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_signal_names(f"SIGTERM,{name}")
    full = name.upper() if name.upper().startswith("SIG") else f"SIG{name.upper()}"
    assert str(info.value) == f"--forward-signals: {full} cannot be caught and forwarded"
