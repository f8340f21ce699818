"""Grandchildren that call ``setsid`` leave their worker's process group, so signalling the
group misses them. The launcher catches them anyway: as a child subreaper when it stops the
job itself, and through the job's own cgroup when it is SIGKILLed (supervisor/containment.py).
The launcher runs as its own process (tests/workers/driver.py); every pid is checked."""

from __future__ import annotations

import os
import signal

import pytest
from jobs import Job, kill_quietly

from malaunch.supervisor.containment import cgroup2_dir


def _cgroup_available() -> bool:
    base = cgroup2_dir()
    return base is not None and os.access(base, os.W_OK) and (base / "cgroup.procs").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_setsid_grandchildren_die_when_the_launcher_is_stopped(job: Job, signum: int) -> None:
    specs = [job.spec(rank, "--setsid-child", "--sleep", "60") for rank in range(2)]
    driver = job.start_driver(job.plan(*specs))
    try:
        job.wait_started(2)
        driver.send_signal(signum)
        assert driver.wait(timeout=30) == 128 + signum
    finally:
        kill_quietly(driver)
    # Two workers and their two escaped grandchildren, by pid.
    job.assert_all_gone(expected_at_least=4)


def test_setsid_grandchildren_die_when_the_launcher_is_sigkilled(job: Job) -> None:
    if not _cgroup_available():
        pytest.skip(
            "no writable cgroup v2 hierarchy on this machine: after a SIGKILL only the job's "
            "cgroup can reach processes that left their session (docs/job.md)"
        )
    specs = [job.spec(rank, "--setsid-child", "--sleep", "60") for rank in range(2)]
    driver = job.start_driver(job.plan(*specs))
    try:
        job.wait_started(2)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
    finally:
        kill_quietly(driver)
    job.assert_all_gone(expected_at_least=4)  # the reaper killed the whole cgroup
