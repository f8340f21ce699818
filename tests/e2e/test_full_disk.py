"""A full disk under the log directory: the job runs on, the lost logs are said in one error
line (not one per rank: a thousand ranks would bury the console), and no half-written summary
is left (a tmpfs of 16 KiB, filled before the run)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from malaunch.testing import run_cli, run_dir


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "full"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root; a full disk cannot be made otherwise")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        # Writing past the end fails: the disk is then full, which is the point.
        with open(mount / "filler", "wb") as filler, contextlib.suppress(OSError):
            filler.write(b"\0" * 64 * 1024)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_costs_the_logs_not_the_job(full_disk: Path, tmp_path: Path) -> None:
    logs = full_disk / "logs"
    result = run_cli(
        ["--framework", "torch_ddp", "--nproc-per-node", "2", "--log-dir", str(logs), "--",
         sys.executable, "-c", "print('x' * 100)"],
        cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("malaunch: error: ")]
    assert len(errors) == 1, lines
    assert "cannot write the log of rank " in errors[0]
    assert errors[0].endswith(
        "No space left on device (the logs of other processes that fail alike are not named again)"
    )
    summary = [line for line in lines if "cannot write" in line and "malaunch-summary.json" in line]
    assert len(summary) == 1
    assert "No space left on device" in summary[0]
    left = sorted(path.name for path in run_dir(logs).iterdir())
    # No summary and no manifest (they could not be written), no .partial file of either.
    assert left == ["malaunch-index.bin", "worker-0.log", "worker-1.log"]
