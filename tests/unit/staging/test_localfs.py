"""The local filesystem as staging meets it: every errno in one of three classes, FIFOs and
devices never opened, bookkeeping beside the data and not in it, a stuck transfer left behind."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Iterator, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.errors import ExitCode, MissingInputError, UsageError
from malaunch.log import logger
from malaunch.staging import RetryPolicy, Stager, StagingError, parse_pairs
from malaunch.staging.localfs import PARTIAL, local, local_error
from malaunch.staging.pool import Run, run_all
from malaunch.staging.progress import Progress

FAST = RetryPolicy(attempts=2, first=0.01)
# The classes docs/staging.md documents: what a destination cannot be (64), what makes a source
# missing or unreadable (66); every other errno is 74.
NOT_A_PLACE = {errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.ELOOP, errno.ENAMETOOLONG}
UNREADABLE = {errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG, errno.EACCES}
UNREADABLE |= {errno.EPERM}


@pytest.fixture
def messages() -> Iterator[List[str]]:
    caught: List[str] = []
    sink = logger.add(lambda message: caught.append(str(message).rstrip("\n")), format="{message}")
    yield caught
    logger.remove(sink)


@settings(derandomize=True, max_examples=300)
@given(number=st.sampled_from(sorted(errno.errorcode)), reading=st.booleans())
def test_every_errno_is_64_66_or_74_in_one_line_naming_path_and_text(
    number: int, reading: bool
) -> None:
    exc = OSError(number, os.strerror(number), "/data/x y")
    error = local_error(exc, "/elsewhere", reading=reading, direction="in")
    verb = "read" if reading else "write"
    assert str(error) == f"stage-in: cannot {verb} /data/x y: {os.strerror(number)}"
    if reading:
        expected = ExitCode.NO_INPUT if number in UNREADABLE else ExitCode.IO_ERROR
    else:
        expected = ExitCode.USAGE if number in NOT_A_PLACE else ExitCode.IO_ERROR
    assert error.exit_code == expected


@pytest.mark.parametrize(
    ("number", "reading", "cls"),
    [
        (errno.EROFS, False, StagingError),
        (errno.ENOSPC, False, StagingError),
        (errno.EDQUOT, False, StagingError),
        (errno.EIO, False, StagingError),
        (errno.EACCES, False, StagingError),  # a destination this process may not write
        (errno.ENOTDIR, False, UsageError),  # a path through a file
        (errno.EEXIST, False, UsageError),  # a file where a folder must be
        (errno.ENOENT, True, MissingInputError),
        (errno.EACCES, True, MissingInputError),
        (errno.EIO, True, StagingError),
    ],
)
def test_the_named_classes(number: int, reading: bool, cls: type) -> None:
    exc = OSError(number, os.strerror(number))
    error = local_error(exc, "/p", reading=reading, direction="out")
    assert type(error) is cls


def test_a_partial_download_is_named_by_its_target() -> None:
    exc = OSError(errno.ENOSPC, "No space left on device", f"/d/.a.bin.0123{PARTIAL}")
    error = local_error(exc, "/d/a.bin", reading=False, direction="in")
    assert str(error) == "stage-in: cannot write /d/a.bin: No space left on device"


def test_local_maps_oserrors_but_lets_interruptions_through() -> None:
    writing = local("/t", reading=False, direction="out")
    with pytest.raises(UsageError, match=r"^stage-out: cannot write /t: Not a directory$"), writing:
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory")
    with pytest.raises(InterruptedError), local("/t", reading=False, direction="out"):
        raise InterruptedError("stopped while waiting for the lock")


def stage_in(source: Path, work: Path, local_name: str = "data") -> Stager:
    pairs = parse_pairs([f"{local_name}={source.as_uri()}"], "--stage-in")
    stager = Stager(pairs, {}, launch_dir=work, retry=FAST)
    stager.stage_in()
    return stager


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "remote"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub/b.txt").write_text("bb")
    return root


def test_the_data_folder_holds_only_the_data(source: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    stage_in(source, work)
    assert sorted(os.listdir(work / "data")) == ["a.txt", "sub"]
    assert sorted(os.listdir(work / ".malaunch-stage")) == ["data.in.json", "data.in.lock"]
    stage_in(source / "a.txt", work, "one.txt")  # a single file: the same folder beside it
    assert "one.txt.in.json" in os.listdir(work / ".malaunch-stage")


def test_an_earlier_versions_manifest_is_read_once_then_removed(
    source: Path, tmp_path: Path, messages: List[str]
) -> None:
    work = tmp_path / "work"
    stage_in(source, work)
    # The format is unchanged: an earlier version wrote this file, inside the data.
    (work / ".malaunch-stage/data.in.json").rename(work / "data/.malaunch-stage-in.json")
    (work / "data/.malaunch-stage-in.lock").touch()
    messages.clear()
    [report] = stage_in(source, work).reports()
    assert (report.files, report.skipped) == (0, 2)  # an upgrade transfers nothing again
    assert sorted(os.listdir(work / "data")) == ["a.txt", "sub"]
    assert json.loads((work / ".malaunch-stage/data.in.json").read_text())["files"].keys() == {
        "a.txt",
        "sub/b.txt",
    }
    assert messages == ["stage-in: 2 files up to date, 0 B transferred"]


def test_fifos_and_devices_are_skipped_never_opened(
    source: Path, tmp_path: Path, messages: List[str]
) -> None:
    os.mkfifo(source / "pipe")  # in the source: an open would wait for a writer
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    os.mkfifo(work / "data/a.txt")  # in the destination: a file must not replace it
    stager = stage_in(source, work)
    assert (stager.reports()[0].files, (work / "data/sub/b.txt").read_text()) == (1, "bb")
    assert (work / "data/a.txt").is_fifo() and not (work / "data/pipe").exists()
    assert messages[:2] == [
        f"stage-in: {source}/pipe is a FIFO, not a regular file: skipped",
        f"stage-in: {work}/data/a.txt is a FIFO, not a regular file: skipped",
    ]
    null = tmp_path / "null"  # like /dev/null, but ours: a failing test must not take the real one
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        return  # making a device node needs root; the FIFOs above are the same class
    pairs = parse_pairs([f"{null}={(source / 'a.txt').as_uri()}"], "--stage-in")
    Stager(pairs, {}, launch_dir=work).stage_in()
    assert null.is_char_device()
    assert messages[-2:] == [
        f"stage-in: {null} is a device, not a regular file: skipped",
        "stage-in: 0 files up to date, 0 B transferred",
    ]


def test_a_stage_out_says_a_fifo_once_over_every_pass(tmp_path: Path, messages: List[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "c.bin").write_bytes(b"c")
    os.mkfifo(out / "pipe")
    pairs = parse_pairs([f"out={(tmp_path / 'remote').as_uri()}"], "--stage-out")
    stager = Stager(pairs, {}, launch_dir=tmp_path)
    for _ in range(3):
        stager.stage_out(final=False)
    assert sorted(os.listdir(tmp_path / "remote")) == ["c.bin"]
    said = [line for line in messages if "FIFO" in line]
    assert said == [f"stage-out: {out}/pipe is a FIFO, not a regular file: skipped"]


def test_a_transfer_stuck_on_a_fifo_is_left_behind_when_the_pass_stops(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    run = Run(workers=2, retry=FAST, stream=None, abort=threading.Event())
    entered = threading.Event()

    def work(item: int) -> None:
        entered.set()
        with open(fifo, "rb") as blocked:  # no writer: blocks until the test opens one
            blocked.read()

    threading.Timer(0.5, run.abort.set).start()
    try:
        with pytest.raises(StagingError, match=r"^stopped with 1 file not transferred$"):
            run_all(run, [1], work, Progress("x", 1, 1))
        assert entered.is_set()
        stuck = [t for t in threading.enumerate() if t.name.startswith("malaunch-stage-")]
        assert stuck and all(thread.daemon for thread in stuck)  # the exit never waits for it
    finally:
        with open(fifo, "wb"):  # let the reader go
            pass
        deadline = time.monotonic() + 10
        while any(t.name.startswith("malaunch-stage-") for t in threading.enumerate()):
            assert time.monotonic() < deadline
            time.sleep(0.01)


def make_special(path: Path, kind: str) -> socket.socket:
    """A FIFO, a bound UNIX socket or a character device at ``path`` (the socket returned, to
    close; a dummy otherwise)."""
    held = socket.socket(socket.AF_UNIX)
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "socket":
        held.bind(str(path))
    else:
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a null device, ours
        except PermissionError:
            held.close()
            pytest.skip("making a device node needs root (CAP_MKNOD)")
    return held


@pytest.mark.parametrize("kind", ["FIFO", "socket", "device"])
def test_each_kind_is_skipped_as_a_local_and_inside_one(
    tmp_path: Path, kind: str, messages: List[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "c.bin").write_bytes(b"c")
    with make_special(out / "odd", kind), make_special(tmp_path / "alone", kind):
        pairs = parse_pairs(
            [f"out={(tmp_path / 'r1').as_uri()}", f"alone={(tmp_path / 'r2').as_uri()}"],
            "--stage-out",
        )
        reports = Stager(pairs, {}, launch_dir=tmp_path).stage_out(final=True)
    assert [(report.files, report.errors) for report in reports] == [(1, ()), (0, ())]
    assert os.listdir(tmp_path / "r1") == ["c.bin"] and not (tmp_path / "r2").exists()
    assert [line for line in messages if "not a regular file" in line] == [
        f"stage-out: {out}/odd is a {kind}, not a regular file: skipped",
        f"stage-out: {tmp_path}/alone is a {kind}, not a regular file: skipped",
    ]
