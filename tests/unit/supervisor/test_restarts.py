"""--max-restarts: tear down, start again with MALAUNCH_RESTART_COUNT, give up after N."""

from __future__ import annotations

import signal
from typing import List, Mapping, Optional

from jobs import Job

from malaunch.models import LaunchPlan
from malaunch.supervisor.supervise import supervise


def both_ranks(job: Job, rank: int, *args: str) -> List[str]:
    """Options that make a rank record its attempt, then wait for the other rank to do so."""
    done = [str(job.root / f"done{other}-{{restart}}") for other in range(2)]
    return [
        "--env-out",
        str(job.root / "seen.txt"),
        "--done-file",
        done[rank],
        "--wait-files",
        *done,
        *args,
    ]


def test_restarts_until_success(job: Job) -> None:
    seen = job.root / "seen.txt"
    specs = [job.spec(rank, *both_ranks(job, rank, "--fail-before", "2")) for rank in range(2)]
    assert job.run(job.plan(*specs), max_restarts=3) == 0
    # Each attempt started both ranks with its restart count; attempt 2 succeeded.
    assert sorted(seen.read_text().splitlines()) == ["0 0", "0 1", "0 2", "1 0", "1 1", "1 2"]
    summary = job.summary()
    assert (summary["exit_code"], summary["restarts"], summary["first_failure"]) == (0, 2, None)


def test_gives_up_with_the_failure_code(job: Job) -> None:
    seen = job.root / "seen.txt"
    sleeper = job.spec(0, *both_ranks(job, 0, "--sleep", "60", "--child"))
    failing = job.spec(1, *both_ranks(job, 1, "--exit", "4"))
    assert job.run(job.plan(sleeper, failing), max_restarts=1) == 4
    assert sorted(seen.read_text().splitlines()) == ["0 0", "0 1", "1 0", "1 1"]
    summary = job.summary()
    assert (summary["restarts"], summary["first_failure"]["rank"]) == (1, 1)
    job.assert_all_gone(expected_at_least=4)


def test_replan_builds_each_restart(job: Job) -> None:
    seen = job.root / "seen.txt"
    calls: List[int] = []

    def replan(attempt: int, master_port: Optional[int], hosts: Mapping[int, str]) -> LaunchPlan:
        assert master_port is None  # the test plan names no rendezvous port to refresh
        assert hosts == {}  # no node was replaced
        calls.append(attempt)
        # A re-read topology may differ: here the second plan has a second rank.
        specs = [job.spec(rank, "--env-out", str(seen), "--fail-before", "2") for rank in range(2)]
        return job.plan(*specs[:attempt])

    first = job.plan(job.spec(0, "--env-out", str(seen), "--fail-before", "2"))
    options = job.options(max_restarts=2)
    assert supervise(first, options, replan=replan) == 0
    assert calls == [1, 2]
    assert sorted(seen.read_text().splitlines()) == ["0 0", "0 1", "0 2", "1 2"]


def test_launcher_signal_does_not_restart(job: Job) -> None:
    specs = [job.spec(rank, "--sleep", "60") for rank in range(2)]
    sender = job.signal_after_start(2, signal.SIGTERM)
    assert job.run(job.plan(*specs), max_restarts=5) == 128 + signal.SIGTERM
    sender.join()
    assert job.summary()["restarts"] == 0
    job.assert_all_gone(expected_at_least=2)
