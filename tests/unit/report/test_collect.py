"""Collecting a run for the report: log dirs -> nodes -> rows of bars, failures, files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from loguru import logger

from malaunch.errors import MissingInputError
from malaunch.report.collect import collect
from malaunch.report.model import FAILED, HUNG, OK, STOPPED, UNKNOWN, JobReport, Row

from .runs import HOSTILE, HOSTS, T0, Launcher, exit_failure, iso, restarted_job


def rows_by_rank(job: JobReport) -> Dict[int, Row]:
    return {row.rank: row for row in job.rows if row.rank is not None}


@pytest.fixture
def warnings() -> Iterator[List[str]]:
    caught: List[str] = []
    sink = logger.add(lambda message: caught.append(str(message).rstrip("\n")), format="{message}")
    yield caught
    logger.remove(sink)


def test_a_simulation_has_a_node_per_node_dir(tmp_path: Path) -> None:
    job = collect(restarted_job(tmp_path / "sim"))
    assert job.simulated
    assert [(node.index, node.host) for node in job.nodes] == [(0, HOSTS[0]), (1, HOSTS[1])]
    assert [[row.rank for row in node.rows] for node in job.nodes] == [[0, 1], [2, 3]]
    assert (job.source, job.job_id, job.framework, job.exit_code) == (
        "simulate-volcano",
        "ma-job-7",
        "torch_ddp",
        0,
    )
    assert job.topology["source"] == "volcano"  # the nodes' own view, with devices


def test_every_attempt_is_a_bar_and_earlier_ends_are_estimates(tmp_path: Path) -> None:
    job = collect(restarted_job(tmp_path / "sim"))
    for row in job.rows:
        first, second = row.bars
        assert (first.attempt, first.start, first.end, first.exact) == (0, T0, T0 + 5, False)
        assert (second.attempt, second.start, second.end, second.exact) == (1, T0 + 5, T0 + 7, True)
        assert (second.outcome, second.ending) == (OK, "exit 0")
        assert second.pid == 1100 + row.rank  # type: ignore[operator]


def test_the_failed_rank_and_the_ranks_the_job_stopped(tmp_path: Path) -> None:
    ranks = rows_by_rank(collect(restarted_job(tmp_path / "sim")))
    assert (ranks[3].bars[0].outcome, ranks[3].bars[0].ending) == (FAILED, "exit 1")
    assert [ranks[r].bars[0].outcome for r in (0, 1, 2)] == [STOPPED] * 3
    assert ranks[3].bars[0].last_output == T0 + 1.1  # from the line index


def test_node_launchers_are_timed_by_the_simulation(tmp_path: Path) -> None:
    job = collect(restarted_job(tmp_path / "sim"))
    for node in job.nodes:
        assert node.launcher is not None
        launcher = node.launcher
        assert (launcher.start, launcher.end, launcher.exact) == (T0 - 1, T0 + 3, True)
        assert (launcher.outcome, launcher.pid) == (OK, 10 + node.index)


def test_the_failure_is_said_once_with_its_exception_and_log(tmp_path: Path) -> None:
    root = tmp_path / "sim"
    job = collect(restarted_job(root))
    [failure] = job.failures
    assert (failure.attempt, failure.node, failure.rank, failure.code) == (0, 1, 3, 1)
    assert failure.exception is not None and HOSTILE in failure.exception
    assert failure.decision == "restart 1 of 1"
    assert failure.log is not None and failure.log.path == root / "node-1" / "worker-3.log"
    assert [attempt["attempt"] for attempt in job.attempts] == [0, 1]


def test_every_file_is_listed_where_it_belongs(tmp_path: Path) -> None:
    root = tmp_path / "sim"
    job = collect(restarted_job(root))
    node = job.nodes[1]
    assert [log.label for log in node.logs] == [
        "launcher output",
        "rank 2",
        "rank 3",
        "malaunch-summary.json",
        "malaunch-run.json",
    ]
    assert node.logs[0].path == root / "node-1.log"
    assert all(log.path is not None and log.path.is_file() for log in node.logs)
    assert [log.path for log in job.logs] == [
        root / "malaunch-summary.json",
        root / "malaunch-run.json",
    ]


def test_a_launchers_own_dir_is_one_node(tmp_path: Path) -> None:
    log = str(tmp_path / "logs" / "worker-1.log")
    run = Launcher(
        tmp_path / "logs",
        ranks=(0, 1, 2),
        endings={0: (None, "SIGTERM"), 1: (3, None)},
        failures={0: exit_failure(0, 1, 3, log, ["step 1"])},
        exit_code=3,
    )
    job = collect(run.write())
    assert not job.simulated and job.exit_code == 3 and len(job.nodes) == 1
    ranks = rows_by_rank(job)
    endings = [(ranks[r].bars[0].outcome, ranks[r].bars[0].ending) for r in (0, 1, 2)]
    assert endings == [(STOPPED, "SIGTERM"), (FAILED, "exit 3"), (OK, "exit 0")]
    launcher = job.nodes[0].launcher
    assert launcher is not None and (launcher.outcome, launcher.exact) == (FAILED, False)
    assert (launcher.start, launcher.end) == (T0 - 0.5, T0 + 2)  # manifest start, last end
    assert job.failures[0].tail == ("step 1",)


def test_a_restart_delay_shortens_the_estimated_end(tmp_path: Path) -> None:
    directory = Launcher(tmp_path / "logs", starts=(T0, T0 + 5)).write()
    summary = json.loads((directory / "malaunch-summary.json").read_text())
    summary["attempts"][0]["delay"] = 2
    (directory / "malaunch-summary.json").write_text(json.dumps(summary))
    assert {row.bars[0].end for row in collect(directory).rows} == {T0 + 3}


def test_attempts_never_overlap_though_the_manifest_records_them_late(tmp_path: Path) -> None:
    directory = Launcher(tmp_path / "logs", starts=(T0, T0 + 5)).write()
    manifest = json.loads((directory / "malaunch-run.json").read_text())
    manifest["attempts"][1]["started"] = iso(T0 + 5.02)  # once its processes had started
    (directory / "malaunch-run.json").write_text(json.dumps(manifest))
    job = collect(directory)
    assert [(row.bars[0].end, row.bars[1].start) for row in job.rows] == [(T0 + 5, T0 + 5)] * 2
    assert job.nodes[0].attempt_starts == (T0, T0 + 5)


def test_a_process_without_a_pid_is_matched_by_its_rank(tmp_path: Path) -> None:
    directory = Launcher(tmp_path / "logs", endings={1: (4, None)}).write()
    for name in ("malaunch-run.json", "malaunch-summary.json"):
        document = json.loads((directory / name).read_text())
        for process in document.get("processes") or document["attempts"][0]["processes"]:
            process["pid"] = None  # a process that could not be started has none
        (directory / name).write_text(json.dumps(document))
    job = collect(directory)
    assert [(row.bars[0].exact, row.bars[0].ending) for row in job.rows] == [
        (True, "exit 0"),
        (True, "exit 4"),
    ]


def test_the_last_output_of_each_attempt_comes_from_the_line_index(tmp_path: Path) -> None:
    lines = {0: [(T0 + 0.5, "a"), (T0 + 1.5, "b"), (T0 + 5.5, "c")]}
    run = Launcher(tmp_path / "logs", ranks=(0,), starts=(T0, T0 + 5), lines=lines)
    [row] = collect(run.write()).rows
    assert [bar.last_output for bar in row.bars] == [T0 + 1.5, T0 + 5.5]


def test_a_run_without_a_summary_ends_unknown_at_its_last_output(tmp_path: Path) -> None:
    run = Launcher(tmp_path / "logs", lines={0: [(T0 + 1.25, "still going")]})
    job = collect(run.write(summary=False))
    ranks = rows_by_rank(job)
    assert (ranks[0].bars[0].outcome, ranks[0].bars[0].end) == (UNKNOWN, T0 + 1.25)
    assert ranks[1].bars[0].ending == "unknown (no summary)"
    assert job.exit_code is None and job.nodes[0].exit_code is None


def test_a_summary_without_a_manifest_still_draws_the_last_attempt(tmp_path: Path) -> None:
    job = collect(Launcher(tmp_path / "logs").write(manifest=False))
    assert [(row.rank, len(row.bars), row.bars[0].exact) for row in job.rows] == [
        (0, 1, True),
        (1, 1, True),
    ]


def test_a_malformed_summary_is_ignored_with_a_warning(tmp_path: Path, warnings: List[str]) -> None:
    directory = Launcher(tmp_path / "logs").write()
    (directory / "malaunch-summary.json").write_text("{not json")
    job = collect(directory)
    assert {row.bars[0].outcome for row in job.rows} == {UNKNOWN}
    assert len(warnings) == 1
    assert warnings[0].startswith(f"ignoring {directory / 'malaunch-summary.json'}: not JSON")


def test_a_moved_log_dir_still_finds_its_files(tmp_path: Path) -> None:
    directory = Launcher(tmp_path / "on-the-cluster").write()
    moved = tmp_path / "copied" / "logs"
    moved.parent.mkdir()
    shutil.move(str(directory), str(moved))
    job = collect(moved)
    assert [row.log.path for row in job.rows] == [moved / "worker-0.log", moved / "worker-1.log"]
    assert all(row.log.recorded.startswith(str(directory)) for row in job.rows)


def test_a_hang_marks_the_silent_rank_and_the_odd_ones_out(tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    stack = directory / "stacks" / "attempt-0" / "rank-1.txt"
    hang = {
        "rank": 1, "role": "worker", "node": 0, "seconds_silent": 3.0, "detected_at": T0 + 4,
        "culprits": [1], "groups": [{"frame": "wait (a.py:1)", "ranks": [0]}],
        "reason": "rank 1 is elsewhere, in stuck (b.py:2), while ranks 0,2 wait in wait (a.py:1)",
        "stack_file": str(stack),
    }  # fmt: skip
    failure = {"kind": "hang", "node": 0, "rank": 1, "role": "worker", "code": 124, "hang": hang}
    run = Launcher(
        directory,
        endings={0: (None, "SIGTERM"), 1: (None, "SIGTERM")},
        failures={0: failure},
        exit_code=124,
        extra={"hang": hang},
        lines={1: [(T0 + 1, "step 1 <b>")]},
    )
    run.write()
    stack.parent.mkdir(parents=True)
    stack.write_text("Thread 1\n")
    job = collect(directory)
    ranks = rows_by_rank(job)
    assert (ranks[1].bars[0].outcome, ranks[1].culprit) == (HUNG, True)
    assert (ranks[0].bars[0].outcome, ranks[0].culprit) == (STOPPED, False)
    assert job.hang == hang
    [hung] = job.failures
    assert hung.log is not None and hung.log.path == directory / "worker-1.log"
    assert hung.tail == ("step 1 <b>",)  # read from its log: a hang record carries none
    assert "stack stacks/attempt-0/rank-1.txt" in [log.label for log in job.nodes[0].logs]


def test_staging_phases_are_read_whatever_their_shape(tmp_path: Path) -> None:
    staging = {
        "stage_in": {"start": iso(T0 - 3), "end": iso(T0 - 1), "bytes": 1024, "files": [1]},
        "stage_out": [{"name": "final", "started": T0 + 3, "finished": T0 + 4, "errors": 0}],
    }
    job = collect(Launcher(tmp_path / "logs", extra={"staging": staging}).write())
    phases = job.nodes[0].phases
    assert [(p.name, p.start, p.end, p.detail) for p in phases] == [
        ("stage_in", T0 - 3, T0 - 1, "bytes: 1024, files: 1"),
        ("final", T0 + 3, T0 + 4, "errors: 0"),
    ]


def test_staging_with_durations_only_is_placed_around_the_run(tmp_path: Path) -> None:
    # The shape of malaunch.staging's MappingReport: a direction and seconds, no times.
    staging = [
        {"local": "/cache/data", "url": "obs://b/data", "direction": "in", "files": 3,
         "bytes": 300, "skipped": 0, "removed": 0, "seconds": 1.5, "errors": []},
        {"local": "/cache/out", "url": "obs://b/out", "direction": "out", "files": 1,
         "bytes": 10, "skipped": 0, "removed": 0, "seconds": 0.5, "errors": ["x"]},
    ]  # fmt: skip
    job = collect(Launcher(tmp_path / "logs", extra={"staging": staging}).write())
    stage_in, stage_out = job.nodes[0].phases
    assert (stage_in.name, stage_in.start, stage_in.end) == ("stage-in /cache/data", T0 - 1.5, T0)
    assert (stage_out.name, stage_out.start, stage_out.end) == (
        "stage-out /cache/out",
        T0 + 2,
        T0 + 2.5,
    )
    assert stage_out.detail.startswith("url: obs://b/out, files: 1, bytes: 10, skipped: 0, ")
    assert "errors: 1" in stage_out.detail and "placed by its duration" in stage_out.detail


@pytest.mark.parametrize(
    "staging",
    [
        None,
        "done",
        [1, 2],
        {"stage_in": {"start": "yesterday", "end": 3}},
        [{"direction": "sideways", "seconds": 1}, {"direction": "in", "seconds": "1"}],
    ],
)
def test_no_usable_staging_is_no_phase(tmp_path: Path, staging: object) -> None:
    extra = {} if staging is None else {"staging": staging}
    assert collect(Launcher(tmp_path / "logs", extra=extra).write()).nodes[0].phases == ()


def test_values_of_the_wrong_type_read_as_missing(tmp_path: Path) -> None:
    directory = Launcher(tmp_path / "logs").write()
    manifest = json.loads((directory / "malaunch-run.json").read_text())
    manifest["attempts"].append({"attempt": "2", "started": [], "processes": "oops"})
    manifest["attempts"][0]["processes"][0].update(rank="0", pid=True, file=None)
    manifest["topology"] = {"nodes": [{"index": 0, "devices": "many"}]}
    (directory / "malaunch-run.json").write_text(json.dumps(manifest))
    summary = {"exit_code": "0", "processes": 5, "attempts": {"a": 1}, "hang": [], "staging": 3}
    (directory / "malaunch-summary.json").write_text(json.dumps(summary))
    job = collect(directory)
    assert [(row.rank, row.label) for row in job.rows] == [(None, "rank 0"), (1, "rank 1")]
    assert job.exit_code is None and job.failures == ()


def test_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(MissingInputError) as caught:
        collect(tmp_path / "nowhere")
    expected = "no such directory (expected the log dir of a malaunch run, e.g. --log-dir's)"
    assert str(caught.value) == f"{tmp_path / 'nowhere'}: {expected}"


def test_a_file_is_not_a_log_dir(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(MissingInputError, match=r"file: not a directory \(expected"):
        collect(tmp_path / "file")


def test_a_directory_without_a_run(tmp_path: Path) -> None:
    (tmp_path / "node-0").mkdir()  # a node dir with nothing in it is no node
    (tmp_path / "malaunch-run.json").write_text("[]")  # not an object: ignored
    with pytest.raises(MissingInputError) as caught:
        collect(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}: no readable malaunch-run.json or malaunch-summary.json there or in a "
        "node-<k>/ below it; not the log dir of a malaunch run"
    )
