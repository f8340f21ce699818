"""Exit codes, fail-fast teardown, services and spawn failures, with real processes."""

from __future__ import annotations

import os
import signal
from typing import Any, List

import pytest
from jobs import Job

from malaunch.errors import LaunchError
from malaunch.supervisor.attempt import Attempt
from malaunch.supervisor.spawn import Child


def test_all_workers_succeed(job: Job) -> None:
    specs = [job.spec(rank, "--child") for rank in range(4)]
    assert job.run(job.plan(*specs)) == 0
    summary = job.summary()
    assert summary["exit_code"] == 0
    assert summary["first_failure"] is None
    assert [p["exit_code"] for p in summary["processes"]] == [0, 0, 0, 0]
    job.assert_all_gone(expected_at_least=8)  # 4 workers and their 4 children


def test_worker_failure_code_is_the_launcher_code(job: Job, messages: List[str]) -> None:
    sleepers = [job.spec(rank, "--sleep", "60", "--child") for rank in range(3)]
    failing = job.spec(
        3, "--wait-files", *(str(job.pid_dir / f"rank{r}.pids") for r in range(3)), "--exit", "3"
    )
    assert job.run(job.plan(*sleepers, failing)) == 3
    summary = job.summary()
    assert summary["first_failure"]["rank"] == 3
    assert summary["first_failure"]["exit_code"] == 3
    assert [p["signal"] for p in summary["processes"]] == ["SIGTERM"] * 3 + [None]
    assert any("rank 3" in m and "exited with code 3" in m for m in messages)
    assert any(
        m.split()[:2] == ["worker", "3"] and m.endswith("<- first failure") for m in messages
    )
    job.assert_all_gone(expected_at_least=7)


def test_worker_killed_by_signal_gives_128_plus_n(job: Job) -> None:
    sleeper = job.spec(0, "--sleep", "60")
    dying = job.spec(1, "--wait-files", str(job.pid_dir / "rank0.pids"), "--kill-self", "SIGKILL")
    assert job.run(job.plan(sleeper, dying)) == 128 + signal.SIGKILL
    first = job.summary()["first_failure"]
    assert (first["rank"], first["exit_code"], first["signal"]) == (1, None, "SIGKILL")
    job.assert_all_gone(expected_at_least=2)


def test_worker_ignoring_sigterm_is_killed_after_grace(job: Job, messages: List[str]) -> None:
    stubborn = job.spec(0, "--ignore-term", "--child", "--sleep", "60")
    failing = job.spec(1, "--wait-files", str(job.pid_dir / "rank0.pids"), "--exit", "2")
    assert job.run(job.plan(stubborn, failing), grace_period=0.3) == 2
    assert job.summary()["processes"][0]["signal"] == "SIGKILL"
    assert any("sending SIGKILL: rank 0" in m for m in messages)
    job.assert_all_gone(expected_at_least=3)


def test_services_are_stopped_after_the_workers_succeed(job: Job) -> None:
    ps = job.spec(0, "--sleep", "60", role="ps", service=True)
    scheduler = job.spec(None, "--sleep", "60", role="scheduler", service=True)
    ready = [str(job.pid_dir / name) for name in ("ps0.pids", "scheduler.pids")]
    workers = [job.spec(rank, "--wait-files", *ready) for rank in range(2)]
    assert job.run(job.plan(ps, scheduler, *workers)) == 0
    processes = job.summary()["processes"]
    assert [p["signal"] for p in processes] == ["SIGTERM", "SIGTERM", None, None]
    assert [p["service"] for p in processes] == [True, True, False, False]
    job.assert_all_gone(expected_at_least=4)


def test_service_dying_early_is_a_failure(job: Job) -> None:
    worker = job.spec(0, "--sleep", "60")
    scheduler = job.spec(
        None,
        "--wait-files",
        str(job.pid_dir / "rank0.pids"),
        "--exit",
        "5",
        role="scheduler",
        service=True,
    )
    assert job.run(job.plan(worker, scheduler)) == 5
    assert job.summary()["first_failure"]["role"] == "scheduler"
    job.assert_all_gone(expected_at_least=2)


def test_service_exiting_zero_on_its_own_is_done_not_a_failure(job: Job) -> None:
    done = job.pid_dir / "ps-done"
    ps = job.spec(None, "--done-file", str(done), role="ps", service=True)
    worker = job.spec(0, "--wait-files", str(done), "--sleep", "0.3")
    assert job.run(job.plan(worker, ps)) == 0
    summary = job.summary()
    assert summary["first_failure"] is None
    assert [(p["role"], p["exit_code"], p["signal"]) for p in summary["processes"]] == [
        ("worker", 0, None),
        ("ps", 0, None),
    ]
    job.assert_all_gone(expected_at_least=2)


@pytest.mark.parametrize("problem", ["missing", "not-executable"])
def test_unstartable_process_tears_down_the_others(job: Job, problem: str) -> None:
    program = job.root / "program"
    if problem == "not-executable":
        program.write_text("#!/bin/sh\n")
    started = [job.spec(rank, "--sleep", "60", "--child") for rank in range(2)]
    broken = job.spec(2, argv=[str(program), "--x"])
    with pytest.raises(LaunchError, match=rf"rank 2: '{program}': "):
        job.run(job.plan(*started, broken))
    summary = job.summary()
    assert summary["exit_code"] == 71
    assert [p["rank"] for p in summary["processes"]] == [0, 1]
    job.assert_all_gone(expected_at_least=2)


def test_missing_working_dir_is_created_and_env_is_laid_over_ours(job: Job) -> None:
    out = job.root / "env.txt"
    spec = job.spec(7, "--env-out", str(out)).model_copy(
        update={"cwd": str(job.root / "deep" / "cwd")}
    )
    assert job.run(job.plan(spec), environ={**os.environ, "RANK": "not-this"}) == 0
    assert out.read_text() == "7 0\n"  # the plan's RANK wins; MALAUNCH_RESTART_COUNT=0
    assert (job.root / "deep" / "cwd").is_dir()


def test_an_internal_error_still_leaves_nothing_running(job: Job, monkeypatch: Any) -> None:
    started: List[Child] = []

    def crash(self: Attempt) -> None:
        started.extend(self.group.children)
        job.wait_started(2)
        raise RuntimeError("a bug in the event loop")

    monkeypatch.setattr(Attempt, "tick", crash)
    specs = [job.spec(rank, "--sleep", "60", "--child") for rank in range(2)]
    with pytest.raises(RuntimeError, match="a bug"):
        job.run(job.plan(*specs))
    job.assert_all_gone(expected_at_least=4)  # both groups killed, grandchildren too
    assert [child.proc.wait(timeout=5) for child in started] == [-signal.SIGKILL] * 2
