"""The launcher as its own process (tests/workers/driver.py): SIGKILL it, or signal it while it
is still starting processes, and check by pid that nothing it started is left."""

from __future__ import annotations

import os
import signal
from typing import List

from jobs import Job, alive, kill_quietly, wait_until


def test_sigkilled_launcher_leaves_no_process(job: Job) -> None:
    specs = [job.spec(rank, "--sleep", "60", "--child") for rank in range(4)]
    driver = job.start_driver(job.plan(*specs))
    try:
        job.wait_started(4)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
    finally:
        kill_quietly(driver)
    # Workers (PDEATHSIG) and their children (the reaper) are gone within about a second.
    job.assert_all_gone(expected_at_least=8)


def test_pdeathsig_alone_stops_the_workers(job: Job) -> None:
    """Without the reaper, PR_SET_PDEATHSIG still kills every process the launcher started."""
    specs = [job.spec(rank, "--sleep", "60", "--child") for rank in range(2)]
    driver = job.start_driver(job.plan(*specs), reaper=False)
    try:
        job.wait_started(2)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
    finally:
        kill_quietly(driver)
    pairs = [
        [int(pid) for pid in (job.pid_dir / f"rank{r}.pids").read_text().split()] for r in range(2)
    ]
    workers: List[int] = [pair[0] for pair in pairs]
    grandchildren: List[int] = [pair[1] for pair in pairs]
    try:
        wait_until(lambda: not any(alive(pid) for pid in workers), "the workers to die", 3.0)
    finally:  # their own children are the reaper's job; this test cleans them up itself
        for pid in grandchildren:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_sigterm_while_starting_32_processes(job: Job) -> None:
    """SIGTERM as soon as the first worker is up, usually while later ones are being started
    (the deterministic variant is in test_supervisor_signals.py)."""
    specs = [job.spec(rank, "--sleep", "60") for rank in range(32)]
    driver = job.start_driver(job.plan(*specs))
    try:
        job.wait_started(1)
        driver.send_signal(signal.SIGTERM)
        _, stderr = driver.communicate(timeout=30)
    finally:
        kill_quietly(driver)
    assert driver.returncode == 128 + signal.SIGTERM, stderr
    assert len(job.summary()["processes"]) == 32
    job.assert_all_gone(expected_at_least=32)
