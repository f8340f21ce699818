"""The engine on file:// URLs: the manifest (nothing transferred twice, changes fetched again,
stale copies removed), the shared-directory lock, stage-out through temporary names."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import List

import fsspec
import pytest

from malaunch.errors import ExitCode, MissingInputError
from malaunch.staging import MappingReport, RetryPolicy, Stager, StagingError, parse_pairs
from malaunch.staging.manifest import Manifest, exclusive, manifest_path, own_file
from malaunch.staging.progress import Progress
from malaunch.staging.readers import fsspec_reader
from malaunch.staging.transfer import download

FAST = RetryPolicy(attempts=2, first=0.01)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "remote"
    (root / "a/b").mkdir(parents=True)
    (root / "top.txt").write_text("top")
    (root / "a/one.bin").write_bytes(b"1" * 100)
    (root / "a/b/two.bin").write_bytes(b"2" * 200)
    return root


def _stage_in(source: Path, work: Path, url: str = "") -> MappingReport:
    pairs = parse_pairs([f"data={url or 'file://' + str(source)}"], "--stage-in")
    [report] = Stager(pairs, {}, launch_dir=work, retry=FAST).stage_in()
    return report


def test_stage_in_then_nothing_then_only_what_changed(source: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    first = _stage_in(source, work)
    assert (first.files, first.bytes, first.skipped) == (3, 303, 0)
    assert (work / "data/a/b/two.bin").read_bytes() == b"2" * 200
    second = _stage_in(source, work, url=str(source))  # a plain path is a file URL
    assert second.url == str(source)
    assert (second.files, second.bytes, second.skipped) == (3, 303, 0)  # another URL: again
    third = _stage_in(source, work, url=str(source))
    assert (third.files, third.bytes, third.skipped) == (0, 0, 3)
    time.sleep(0.01)
    (source / "a/one.bin").write_bytes(b"x" * 100)  # same size, newer mtime
    (source / "top.txt").unlink()
    fourth = _stage_in(source, work, url=str(source))
    assert (fourth.files, fourth.removed, fourth.skipped) == (1, 1, 1)
    assert (work / "data/a/one.bin").read_bytes() == b"x" * 100
    assert not (work / "data/top.txt").exists()


def test_a_file_changed_locally_is_not_removed(source: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    _stage_in(source, work)
    (work / "data/top.txt").write_text("mine now")
    (source / "top.txt").unlink()
    assert _stage_in(source, work).removed == 0
    assert (work / "data/top.txt").read_text() == "mine now"


def test_an_empty_directory_is_fine_a_missing_one_is_66(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert _stage_in(tmp_path / "empty", tmp_path / "w").files == 0
    with pytest.raises(MissingInputError) as caught:
        _stage_in(tmp_path / "none", tmp_path / "w")
    assert caught.value.exit_code == ExitCode.NO_INPUT
    assert f"file://{tmp_path}/none" in str(caught.value)


def test_stage_out_to_a_filesystem_goes_through_temporary_names(tmp_path: Path) -> None:
    out = tmp_path / "work/out"
    (out / "sub").mkdir(parents=True)
    (out / "sub/ckpt.pt").write_bytes(b"c" * 10)
    (out / "log.txt").write_text("log")
    pairs = parse_pairs([f"out=file://{tmp_path}/remote/run"], "--stage-out")
    stager = Stager(pairs, {}, launch_dir=tmp_path / "work", retry=FAST)
    [first] = stager.stage_out(final=True)
    assert (first.files, first.bytes) == (2, 13)
    remote = tmp_path / "remote/run"
    assert sorted(p.relative_to(remote).as_posix() for p in remote.rglob("*") if p.is_file()) == [
        "log.txt",
        "sub/ckpt.pt",
    ]
    [second] = stager.stage_out(final=True)
    assert (second.files, second.skipped) == (0, 2)
    (out / "log.txt").write_text("log, longer")
    [third] = stager.stage_out(final=True)
    assert (third.files, third.bytes) == (1, 11)
    assert (remote / "log.txt").read_text() == "log, longer"


def test_a_missing_output_is_no_error(tmp_path: Path) -> None:
    pairs = parse_pairs([f"out=file://{tmp_path}/remote"], "--stage-out")
    [report] = Stager(pairs, {}, launch_dir=tmp_path).stage_out(final=True)
    assert (report.files, report.errors) == (0, ())


def test_a_shared_output_is_uploaded_by_node_0_only(tmp_path: Path) -> None:
    pairs = parse_pairs(
        [f"out=file://{tmp_path}/r", f"o{{node}}=file://{tmp_path}/r{{node}}"], "--stage-out"
    )
    node1 = Stager(pairs, {}, launch_dir=tmp_path, node_rank=1, nnodes=2)
    assert [t.mapping.local for t in node1.outputs] == ["o1"]
    node0 = Stager(pairs, {}, launch_dir=tmp_path, node_rank=0, nnodes=2)
    assert [t.mapping.local for t in node0.outputs] == ["out", "o0"]
    assert [t.local for t in node0.outputs] == [tmp_path / "out", tmp_path / "o0"]


def test_manifest_of_another_url_counts_as_empty(tmp_path: Path) -> None:
    path = manifest_path(tmp_path / "d", "in")
    assert path == tmp_path / ".malaunch-stage/d.in.json"  # beside the data, not in it
    assert manifest_path(tmp_path / "f.bin", "out") == tmp_path / ".malaunch-stage/f.bin.out.json"
    first = Manifest(path, "s3://b/p")
    first.put("x", {"size": 1})
    first.save()
    assert Manifest(path, "s3://b/p").entries == {"x": {"size": 1}}
    assert Manifest(path, "s3://b/other").entries == {}
    path.write_text("{not json")
    assert Manifest(path, "s3://b/p").entries == {}
    assert own_file(".malaunch-stage-in.json") and own_file(".x.abc.malaunch-partial")
    assert own_file(".malaunch-stage")
    assert not own_file("model.ckpt")


def test_the_lock_makes_a_second_launcher_wait(tmp_path: Path) -> None:
    lock = tmp_path / ".malaunch-stage-in.lock"
    order: List[str] = []
    stop = threading.Event()
    with exclusive(lock, "d", stop):
        waiter = threading.Thread(target=lambda: _hold(lock, stop, order))
        waiter.start()
        time.sleep(0.3)
        order.append("first done")
    waiter.join(5)
    assert order == ["first done", "second"]


def _hold(lock: Path, stop: threading.Event, order: List[str]) -> None:
    with exclusive(lock, "d", stop):
        order.append("second")


def test_cancel_ends_a_wait_for_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "l.lock"
    stop = threading.Event()
    with exclusive(lock, "d", stop):
        stop.set()
        with pytest.raises(InterruptedError), exclusive(lock, "d", stop):
            pass


def test_a_file_read_in_several_chunks(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("malaunch.staging.readers.CHUNK", 64)
    (source / "a/b/two.bin").write_bytes(bytes(range(256)) * 3)
    report = _stage_in(source, tmp_path / "w")
    assert (tmp_path / "w/data/a/b/two.bin").read_bytes() == bytes(range(256)) * 3
    assert report.bytes == 3 + 100 + 768


def test_a_file_that_grew_since_the_listing_is_caught(source: Path, tmp_path: Path) -> None:
    fs = fsspec.filesystem("file")
    path = source / "top.txt"
    stop = threading.Event()
    with pytest.raises(StagingError, match="got 3 bytes, the listing said 2"):
        download(
            fsspec_reader(fs), str(path), tmp_path / "t", entry={"size": 2},
            progress=Progress("x", 2, 1), url="file://x", retry=FAST, stop=stop,
        )  # fmt: skip
    assert not (tmp_path / "t").exists()
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
