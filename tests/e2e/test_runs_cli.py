"""No run is ever deleted silently (SPEC §12): run folders, ``latest``, ``--keep-runs``,
launches that fail before they start, ``simulate``'s layout and an earlier malaunch's flat
log dir, through the installed command."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from malaunch.testing import clean_env, malaunch_executable, run_cli, run_dir
from malaunch.testing.commands import CliResult

TIMEOUT = 60.0
INFO = "malaunch: info: "
LOCAL = ("--framework", "torch_ddp", "--topology", "local", "--console-ranks", "none")
RUN = r"run-\d{8}-\d{6}-\d{3}[0-9a-f]{3}"


def launch(
    log_dir: Path, text: str, *extra: str, env: Optional[Dict[str, str]] = None
) -> CliResult:
    """A one-rank job that prints ``text``."""
    args = [
        *LOCAL,
        "--log-dir",
        str(log_dir),
        *extra,
        "--",
        sys.executable,
        "-c",
        f"print({text!r})",
    ]
    return run_cli(args, env=clean_env(env or {}), cwd=log_dir.parent, timeout=TIMEOUT)


def runs(log_dir: Path) -> List[str]:
    return sorted(path.name for path in log_dir.iterdir() if path.name.startswith("run-"))


def logs(*args: str) -> CliResult:
    return run_cli(["logs", *args], timeout=TIMEOUT)


def removed_lines(stderr: str) -> List[str]:
    return [line for line in stderr.splitlines() if "removed the run" in line]


def test_a_reused_log_dir_keeps_the_previous_run(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    first = launch(log_dir, "first")
    assert first.code == 0, first.stderr
    before = runs(log_dir)
    second = launch(log_dir, "second")
    assert second.code == 0, second.stderr
    assert removed_lines(second.stderr) == []
    old, new = runs(log_dir)
    assert old == before[0]
    assert os.readlink(log_dir / "latest") == new
    assert (log_dir / old / "worker-0.log").read_text() == "first\n"
    assert (log_dir / new / "worker-0.log").read_text() == "second\n"
    # logs and report read the latest run and say which; --run or its folder pick another.
    latest = logs(str(log_dir))
    assert (latest.code, latest.stdout) == (0, "[node 0 rank 0] second\n")
    assert latest.stderr == f"{INFO}reading the latest run in {log_dir}: {new}\n"
    for args in ([str(log_dir), "--run", old], [str(log_dir / old)]):
        older = logs(*args)
        assert (older.code, older.stdout, older.stderr) == (0, "[node 0 rank 0] first\n", "")
    page = tmp_path / "report.html"
    report = run_cli(["report", str(log_dir), "--html", str(page)], timeout=TIMEOUT)
    assert report.code == 0, report.stderr
    assert report.stdout == f"wrote {page} ({new}: 1 node, 1 process, 0 failures)\n"
    assert str(log_dir / new) in page.read_text()


def test_pruning_beyond_keep_runs_says_what_it_removed(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    for text in ("one", "two"):
        assert launch(log_dir, text, "--keep-runs", "2").code == 0
    first, second = runs(log_dir)
    third = launch(log_dir, "three", env={"MALAUNCH_KEEP_RUNS": "2"})  # the twin
    assert third.code == 0, third.stderr
    assert removed_lines(third.stderr) == [
        f"{INFO}removed the run {log_dir / first} (--keep-runs 2: the newest are kept)"
    ]
    assert runs(log_dir)[0] == second and len(runs(log_dir)) == 2
    # 0 keeps every run.
    assert launch(log_dir, "four", "--keep-runs", "0").code == 0
    assert len(runs(log_dir)) == 3


def test_a_run_whose_launcher_still_runs_is_never_pruned(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    gate = tmp_path / "go"
    script = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
    args = [*LOCAL, "--log-dir", str(log_dir), "--", sys.executable, "-c", script]
    live = subprocess.Popen(
        [malaunch_executable(), *args], env=clean_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (log_dir / "latest").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        (running,) = runs(log_dir)
        second = launch(log_dir, "beside it", "--keep-runs", "1")
        assert second.code == 0, second.stderr
        assert f"{INFO}kept the run {log_dir / running}: its launcher is still running" in (
            second.stderr.splitlines()
        )
        assert running in runs(log_dir)
    finally:
        gate.write_text("")
        _, err = live.communicate(timeout=TIMEOUT)
    assert live.returncode == 0, err
    third = launch(log_dir, "after it", "--keep-runs", "1")
    assert f"{INFO}removed the run {log_dir / running} (--keep-runs 1: the newest are kept)" in (
        third.stderr.splitlines()
    )


@pytest.mark.parametrize(
    ("label", "extra", "code", "error"),
    [
        ("missing stage-in source", ("--stage-in", "data=file:///nonexistent/x"), 66,
         "malaunch: error: file:///nonexistent/x: no such bucket, object or prefix"),
        ("topology refused", ("--topology", "slurm"), 65,
         "malaunch: error: none of SLURM_STEP_NODELIST, SLURM_JOB_NODELIST, SLURM_NODELIST is "
         "set: cannot tell the job's nodes"),
        ("bad option", ("--hang-startup-timeout", "5"), 64,
         "malaunch: error: --hang-startup-timeout needs --hang-timeout"),
    ],
)  # fmt: skip
def test_a_launch_failing_before_it_starts_leaves_every_earlier_run(
    tmp_path: Path, label: str, extra: List[str], code: int, error: Optional[str]
) -> None:
    del label
    log_dir = tmp_path / "logs"
    for text in ("first", "second"):
        assert launch(log_dir, text).code == 0
    before = runs(log_dir)
    latest = os.readlink(log_dir / "latest")
    failed = launch(log_dir, "never", *extra, "--keep-runs", "1")
    assert failed.code == code, failed.stderr
    if error is not None:
        assert failed.stderr.splitlines()[-1] == error
    assert removed_lines(failed.stderr) == []
    # Its own folder went again: it wrote nothing (a launch stopped by another node keeps
    # its summary: test_staging_job.py).
    assert runs(log_dir) == before and os.readlink(log_dir / "latest") == latest
    read = logs(str(log_dir))
    assert (read.code, read.stdout) == (0, "[node 0 rank 0] second\n")
    page = tmp_path / "page.html"
    report = run_cli(["report", str(log_dir), "--html", str(page)], timeout=TIMEOUT)
    assert report.code == 0 and report.stdout.startswith(f"wrote {page} ({latest}: ")


def test_a_flat_log_dir_of_an_earlier_malaunch_is_kept_as_it_is(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    assert launch(log_dir, "old layout").code == 0
    # An earlier malaunch wrote its files directly in the log dir: move a run's files there.
    (run,) = runs(log_dir)
    for path in (log_dir / run).iterdir():
        path.rename(log_dir / path.name)
    (log_dir / run).rmdir()
    (log_dir / "latest").unlink()
    flat = {path.name: path.read_bytes() for path in log_dir.iterdir()}
    first = launch(log_dir, "new layout", "--keep-runs", "1")
    assert first.code == 0, first.stderr
    assert (
        f"{INFO}{log_dir} holds a run of an earlier malaunch, its files directly in the log dir: "
        f"kept as it is; each run now goes to a run-* folder of its own"
    ) in first.stderr.splitlines()
    assert launch(log_dir, "newer", "--keep-runs", "1").code == 0
    assert {p.name: p.read_bytes() for p in log_dir.iterdir() if p.is_file()} == flat
    assert logs(str(log_dir)).stdout == "[node 0 rank 0] newer\n"


def test_simulate_writes_node_folders_inside_its_own_run(tmp_path: Path) -> None:
    log_dir = tmp_path / "sim"
    args = [
        "simulate", "--nodes", "2", "--platform", "volcano", "--framework", "torch_ddp",
        "--console-ranks", "none", "--log-dir", str(log_dir), "--keep-runs", "1", "--",
        sys.executable, "-c", "import os; print('hello from', os.environ['RANK'])",
    ]  # fmt: skip
    first = run_cli(args, timeout=TIMEOUT)
    assert first.code == 0, first.stderr
    (old,) = runs(log_dir)
    second = run_cli(args, timeout=TIMEOUT)
    assert second.code == 0, second.stderr
    (new,) = runs(log_dir)
    assert removed_lines(second.stderr) == [
        f"{INFO}removed the run {log_dir / old} (--keep-runs 1: the newest are kept)"
    ]
    run = run_dir(log_dir)
    assert run == log_dir / new
    assert sorted(p.name for p in run.iterdir()) == [
        "malaunch-index.bin", "malaunch-run.json", "malaunch-summary.json",
        "node-0", "node-0.log", "node-1", "node-1.log",
    ]  # fmt: skip
    for k in (0, 1):  # each node launcher wrote into its node-<k>/ as it is
        assert not list((run / f"node-{k}").glob("run-*"))
        assert not (run / f"node-{k}" / "latest").exists()
        assert (run / f"node-{k}" / f"worker-{k}.log").read_text() == f"hello from {k}\n"
    read = logs(str(log_dir))
    assert sorted(read.stdout.splitlines()) == [
        "[node 0 rank 0] hello from 0",
        "[node 1 rank 1] hello from 1",
    ]
    assert read.stderr == f"{INFO}reading the latest run in {log_dir}: {new}\n"


def test_a_dry_run_creates_no_run_folder(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    args = [*LOCAL, "--log-dir", str(log_dir), "--dry-run", "--", "python", "train.py"]
    result = run_cli(args, timeout=TIMEOUT)
    assert result.code == 0, result.stderr
    assert f'"log_file": "{log_dir / "worker-0.log"}"' in result.stdout
    assert not log_dir.exists()


def test_following_a_log_dir_moves_on_to_a_newer_run(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    assert launch(log_dir, "first").code == 0
    (first,) = runs(log_dir)
    follower = subprocess.Popen(
        [malaunch_executable(), "logs", "--follow", str(log_dir)], env=clean_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "[node 0 rank 0] first\n"
        assert launch(log_dir, "second").code == 0
        assert follower.stdout.readline() == "[node 0 rank 0] second\n"
    finally:
        follower.terminate()
        _, err = follower.communicate(timeout=TIMEOUT)
    (new,) = [name for name in runs(log_dir) if name != first]
    assert follower.returncode == 0, err
    assert err == (
        f"{INFO}reading the latest run in {log_dir}: {first}\n"
        f"{INFO}following the new latest run in {log_dir}: {new}\n"
    )


@pytest.mark.parametrize("elsewhere", ["/etc", "other-log-dir/run-20260101-000000-000abc"])
def test_latest_naming_a_link_dressed_as_a_run_reads_the_real_newest_run(
    tmp_path: Path, elsewhere: str
) -> None:
    # `latest` -> run-20991231-..., itself a link out of the log dir: logs and report followed
    # it (66, "no malaunch-run.json here") while the real run sat beside it.
    log_dir = tmp_path / "logs"
    assert launch(log_dir, "the real run").code == 0
    target = tmp_path / elsewhere if not elsewhere.startswith("/") else Path(elsewhere)
    target.mkdir(parents=True, exist_ok=True)
    os.symlink(target, log_dir / "run-20991231-235959-999fff")
    (log_dir / "latest").unlink()
    os.symlink("run-20991231-235959-999fff", log_dir / "latest")
    result = logs(str(log_dir))
    assert result.code == 0, result.stderr
    assert "the real run" in result.stdout
    report = run_cli(["report", str(log_dir), "--html", str(tmp_path / "r.html")])
    assert report.code == 0, report.stderr
