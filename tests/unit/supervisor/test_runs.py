"""A log dir's run folders: names, the ``latest`` pointer, pruning, creation and removal."""

from __future__ import annotations

import datetime
import fcntl
import os
import time
from pathlib import Path
from typing import List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.errors import MissingInputError, UsageError
from malaunch.files import read_pointer, write_pointer
from malaunch.supervisor.runs import (
    LATEST,
    LOCK,
    MANIFEST,
    RUN_NAME,
    SUMMARY,
    RunFolder,
    current_run,
    pick_run,
    prune,
    run_name,
    runs_in,
)

EPOCH_2000 = 946684800.0
EPOCH_2100 = 4102444800.0
NAMES = [
    "run-20260101-000000-000aaa",
    "run-20260101-000001-000000",
    "run-20261126-031502-4173f9",
]


def make_runs(root: Path, names: List[str], finished: bool = True) -> List[Path]:
    paths = []
    for name in names:
        path = root / name
        path.mkdir(parents=True)
        (path / MANIFEST).write_text("{}")
        if finished:
            (path / SUMMARY).write_text("{}")
        paths.append(path)
    return paths


@settings(max_examples=200, derandomize=True)
@given(
    st.floats(EPOCH_2000, EPOCH_2100),
    st.floats(EPOCH_2000, EPOCH_2100),
    st.text("0123456789abcdef", min_size=3, max_size=3),
    st.text("0123456789abcdef", min_size=3, max_size=3),
)
def test_names_sort_by_the_millisecond_they_were_made(
    first: float, second: float, token_a: str, token_b: str
) -> None:
    a, b = run_name(first, token_a), run_name(second, token_b)
    assert RUN_NAME.fullmatch(a) and RUN_NAME.fullmatch(b)
    ms_a, ms_b = (
        datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc).replace(tzinfo=None)
        for t in (first, second)
    )
    if ms_a.replace(microsecond=ms_a.microsecond // 1000 * 1000) < ms_b.replace(
        microsecond=ms_b.microsecond // 1000 * 1000
    ):
        assert a < b


def test_a_name_is_the_utc_time_its_milliseconds_then_the_token() -> None:
    moment = datetime.datetime(2026, 11, 26, 3, 15, 2, 417_900, tzinfo=datetime.timezone.utc)
    assert run_name(moment.timestamp(), "3f9") == "run-20261126-031502-4173f9"


def test_runs_in_lists_run_folders_oldest_first_and_nothing_else(tmp_path: Path) -> None:
    made = make_runs(tmp_path, list(reversed(NAMES)))
    (tmp_path / "run-notes").mkdir()  # not a run's name
    (tmp_path / "run-20260101-000000-000bbb").write_text("a file")
    (tmp_path / "run-20260101-000000-000ccc").symlink_to(made[0])  # a link, not a folder
    assert [path.name for path in runs_in(tmp_path)] == NAMES


def test_latest_as_a_symlink_or_as_a_file(tmp_path: Path) -> None:
    old, new, _ = make_runs(tmp_path, NAMES)
    write_pointer(tmp_path / LATEST, old.name)
    assert os.readlink(tmp_path / LATEST) == old.name
    assert current_run(tmp_path) == old
    os.unlink(tmp_path / LATEST)
    (tmp_path / LATEST).write_text(new.name + "\n")  # a filesystem without symlinks
    assert read_pointer(tmp_path / LATEST) == new.name
    assert current_run(tmp_path) == new
    write_pointer(tmp_path / LATEST, old.name)  # replaces the file form
    assert current_run(tmp_path) == old


@pytest.mark.parametrize(
    "pointer", ["../elsewhere", "/etc", "run-20990101-000000-000fff", "", "latest"]
)
def test_a_latest_that_names_no_run_here_falls_back_to_the_newest_started(
    tmp_path: Path, pointer: str
) -> None:
    runs = make_runs(tmp_path, NAMES[:2])
    (tmp_path / NAMES[2]).mkdir()  # made, never started: nothing to read yet
    (tmp_path / LATEST).write_text(pointer)
    assert current_run(tmp_path) == runs[1]


def test_a_folder_without_run_folders_has_no_current_run(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text("{}")  # an earlier malaunch's layout, or a run folder
    assert current_run(tmp_path) is None
    (tmp_path / NAMES[0]).mkdir()  # a run not started yet
    assert current_run(tmp_path) is None


def test_pick_run_names_the_runs_there(tmp_path: Path) -> None:
    make_runs(tmp_path, NAMES)
    assert pick_run(tmp_path, NAMES[0]) == tmp_path / NAMES[0]
    with pytest.raises(MissingInputError) as caught:
        pick_run(tmp_path, "../x")
    assert str(caught.value) == (
        f"--run ../x: no such run in {tmp_path}; runs there, oldest first: {', '.join(NAMES)}"
    )


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.integers(0, 6), st.integers(0, 8))
def test_prune_keeps_the_newest_n_with_the_current_one(
    tmp_path_factory: pytest.TempPathFactory, count: int, keep: int
) -> None:
    root = tmp_path_factory.mktemp("prune")
    names = [run_name(EPOCH_2000 + k, "000") for k in range(count + 1)]
    runs = make_runs(root, names)
    current = runs[-1]
    removed = prune(root, keep, current, started=True)
    kept = runs[-keep:] if keep else runs
    assert runs_in(root) == kept
    assert removed == [(path, True) for path in runs if path not in kept]


def test_prune_passes_over_a_run_whose_launcher_holds_its_lock(tmp_path: Path) -> None:
    live, done, current = make_runs(tmp_path, NAMES)
    fd = os.open(live / LOCK, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert prune(tmp_path, 1, current, started=True) == [(done, True)]
    finally:
        os.close(fd)
    assert live.is_dir() and not done.exists()
    assert prune(tmp_path, 1, current, started=True) == [(live, True)]  # its launcher ended


def test_early_ended_launches_are_pruned_apart_and_never_cost_a_run(tmp_path: Path) -> None:
    runs = make_runs(tmp_path, NAMES)
    early = []
    for second in range(3):  # launches that ended before starting: a summary only
        path = tmp_path / run_name(EPOCH_2100 + second, "eee")
        path.mkdir()
        (path / SUMMARY).write_text("{}")
        early.append(path)
    current = early[-1]
    assert prune(tmp_path, 2, current, started=False) == [(early[0], False)]
    assert runs_in(tmp_path) == [*runs, *early[1:]]  # every run kept
    started = tmp_path / run_name(EPOCH_2100 + 9, "fff")
    started.mkdir()
    assert prune(tmp_path, 2, started, started=True) == [(runs[0], True), (runs[1], True)]
    assert current_run(tmp_path) == runs[2]  # an early-ended folder is never read as latest


def test_a_folder_that_never_started_goes_and_leaves_the_others(tmp_path: Path) -> None:
    earlier = make_runs(tmp_path, NAMES)
    write_pointer(tmp_path / LATEST, NAMES[0])
    folder = RunFolder.create(tmp_path, "--log-dir x", 1, time.time)
    assert folder.path.is_dir() and (folder.path / LOCK).is_file()
    (folder.path / "rank_table").mkdir()  # what its topology wait wrote
    folder.close()
    assert not folder.path.exists()
    assert runs_in(tmp_path) == earlier and read_pointer(tmp_path / LATEST) == NAMES[0]


def test_a_started_folder_becomes_latest_and_prunes(tmp_path: Path) -> None:
    earlier = make_runs(tmp_path, NAMES)
    folder = RunFolder.create(tmp_path, "--log-dir x", 2, time.time)
    folder.started()
    assert read_pointer(tmp_path / LATEST) == folder.path.name
    assert runs_in(tmp_path) == [earlier[-1], folder.path]
    folder.close()
    assert folder.path.is_dir() and not (folder.path / LOCK).exists()


def test_a_log_dir_made_for_a_launch_that_never_started_goes_again(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b"
    folder = RunFolder.create(root, "--log-dir a/b", 5, time.time)
    folder.close()
    assert not (tmp_path / "a").exists()


def test_a_log_dir_through_a_file_is_64_naming_the_option(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError) as caught:
        RunFolder.create(tmp_path / "file" / "logs", "--log-dir file/logs", 5, time.time)
    assert (
        str(caught.value) == "--log-dir file/logs: cannot create the log directory: Not a directory"
    )


def test_where_symlinks_are_refused_latest_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some network and object-store mounts refuse symlinks (EPERM): the file form then."""
    runs = make_runs(tmp_path, NAMES[:2])

    def refuse(*_args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "symlink", refuse)
    write_pointer(tmp_path / LATEST, NAMES[0])
    assert (tmp_path / LATEST).read_text() == NAMES[0] + "\n"
    assert current_run(tmp_path) == runs[0]
    write_pointer(tmp_path / LATEST, NAMES[1])
    assert current_run(tmp_path) == runs[1]
    assert sorted(path.name for path in tmp_path.iterdir()) == [LATEST, *NAMES[:2]]


def test_a_launch_that_ended_early_keeps_its_summary_not_latest(tmp_path: Path) -> None:
    earlier = make_runs(tmp_path, NAMES)
    write_pointer(tmp_path / LATEST, NAMES[2])
    folder = RunFolder.create(tmp_path, "--log-dir x", 1, time.time)
    (folder.path / SUMMARY).write_text('{"exit_code": 66}')  # why it stopped
    folder.close()
    assert sorted(p.name for p in folder.path.iterdir()) == [SUMMARY]
    assert runs_in(tmp_path) == [*earlier, folder.path]
    assert read_pointer(tmp_path / LATEST) == NAMES[2]
