"""The staging engine against a real S3 API server on loopback (moto's server).

Stage-in of a nested tree (hashes equal), a second run with nothing changed (0 bytes), a
changed object fetched again, two launchers staging one mapping into one directory at once,
a 2-rank job reading what was staged and writing outputs, stage-out final and periodic, the
server stopped before and during an upload (retries, then exit 74 naming the URL, no partial
object), a missing bucket or prefix and missing credentials (66), obs:// through the ModelArts
variables, X2MindSpore's path_mapping_config.py, and an unknown scheme (64).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from s3server import S3Server, running_server

from malaunch.errors import ExitCode, MissingInputError, UsageError
from malaunch.staging import (
    RetryPolicy,
    StageMapping,
    Stager,
    StagingError,
    parse_pairs,
    read_path_mapping,
)
from malaunch.staging.progress import Progress
from malaunch.staging.transfer import download

FAST = RetryPolicy(attempts=3, first=0.1, factor=2.0, most=0.5)
TREE = {
    "train/part-0.bin": 300_000,
    "train/part-1.bin": 5_000,
    "train/deep/er/x.bin": 1,
    "valid/v.bin": 70_000,
    "README": 12,
    "empty.txt": 0,
}


@pytest.fixture
def s3() -> Iterator[S3Server]:
    yield from running_server()


@pytest.fixture
def bucket(s3: S3Server) -> Dict[str, bytes]:
    """Bucket ``data`` holding :data:`TREE` under ``set/``; bucket ``results``, empty."""
    client = s3.client()
    client.create_bucket(Bucket="data")
    client.create_bucket(Bucket="results")
    contents = {}
    for name, size in TREE.items():
        body = os.urandom(size)
        client.put_object(Bucket="data", Key=f"set/{name}", Body=body)
        contents[name] = body
    client.put_object(Bucket="data", Key="settings.json", Body=b"{}")  # not under set/
    return contents


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tree(root: Path) -> Dict[str, str]:
    return {
        p.relative_to(root).as_posix(): _digest(p.read_bytes())
        for p in root.rglob("*")
        if p.is_file() and ".malaunch-" not in p.name
    }


def _stager(mappings: List[StageMapping], env: Dict[str, str], where: Path, **kw: Any) -> Stager:
    return Stager(mappings, env, launch_dir=where, retry=FAST, **kw)


def test_stage_in_copies_a_nested_tree(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    stager = _stager(parse_pairs(["data=s3://data/set"], "--stage-in"), s3.env(), tmp_path)
    [report] = stager.stage_in()
    assert _tree(tmp_path / "data") == {name: _digest(body) for name, body in bucket.items()}
    assert (report.files, report.bytes, report.skipped) == (len(TREE), sum(TREE.values()), 0)
    assert report.errors == ()
    assert not [p for p in (tmp_path / "data").rglob("*partial*")]


def test_a_second_run_transfers_nothing_and_a_changed_object_comes_again(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    pairs = parse_pairs(["data=s3://data/set/"], "--stage-in")
    _stager(pairs, s3.env(), tmp_path).stage_in()
    [again] = _stager(pairs, s3.env(), tmp_path).stage_in()
    assert (again.files, again.bytes, again.skipped) == (0, 0, len(TREE))

    s3.client().put_object(Bucket="data", Key="set/valid/v.bin", Body=b"new contents")
    s3.client().delete_object(Bucket="data", Key="set/README")
    [third] = _stager(pairs, s3.env(), tmp_path).stage_in()
    assert (third.files, third.bytes, third.removed) == (1, len(b"new contents"), 1)
    assert (tmp_path / "data/valid/v.bin").read_bytes() == b"new contents"
    assert not (tmp_path / "data/README").exists()


def test_a_local_copy_changed_by_hand_is_fetched_again(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    pairs = parse_pairs(["data=s3://data/set"], "--stage-in")
    _stager(pairs, s3.env(), tmp_path).stage_in()
    (tmp_path / "data/README").write_bytes(b"edited")
    [report] = _stager(pairs, s3.env(), tmp_path).stage_in()
    assert report.files == 1
    assert (tmp_path / "data/README").read_bytes() == bucket["README"]


def test_a_single_object(s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path) -> None:
    (tmp_path / "into").mkdir()
    pairs = parse_pairs(
        ["v.bin=s3://data/set/valid/v.bin", "into=s3://data/set/README"], "--stage-in"
    )
    _stager(pairs, s3.env(), tmp_path).stage_in()
    assert (tmp_path / "v.bin").read_bytes() == bucket["valid/v.bin"]
    assert (tmp_path / "into/README").read_bytes() == bucket["README"]


def test_two_launchers_staging_one_directory_transfer_each_file_once(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    """As two nodes with a shared filesystem: one downloads, the other waits and finds it done."""
    pairs = parse_pairs(
        ["/shared/data=s3://data/set".replace("/shared", str(tmp_path))], "--stage-in"
    )
    reports: List[Any] = []
    stagers = [_stager(pairs, s3.env(), tmp_path, node_rank=n, nnodes=2) for n in (0, 1)]
    threads = [threading.Thread(target=lambda s=s: reports.extend(s.stage_in())) for s in stagers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(r.files for r in reports) == [0, len(TREE)]
    assert sum(r.bytes for r in reports) == sum(TREE.values())
    assert _tree(tmp_path / "data") == {name: _digest(body) for name, body in bucket.items()}


RANK = """
import hashlib, json, os, pathlib, sys
rank = int(sys.argv[1])
data = pathlib.Path("data")
seen = {p.relative_to(data).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(data.rglob("*")) if p.is_file() and ".malaunch-" not in p.name}
assert seen == json.loads(os.environ["EXPECTED"]), seen
out = pathlib.Path("out") / f"rank{rank}"
out.mkdir(parents=True, exist_ok=True)
(out / "checkpoint.bin").write_bytes(bytes([rank]) * 1000)
"""


def test_stage_in_a_two_rank_job_then_stage_out(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    mappings = parse_pairs(["data=s3://data/set"], "--stage-in")
    mappings += parse_pairs(["out=s3://results/run1/"], "--stage-out")
    stager = _stager(mappings, s3.env(), tmp_path)
    stager.preflight()
    stager.stage_in()
    expected = {name: _digest(body) for name, body in bucket.items()}
    env = {**os.environ, "EXPECTED": __import__("json").dumps(expected)}
    ranks = [
        subprocess.Popen([sys.executable, "-c", RANK, str(rank)], cwd=tmp_path, env=env)
        for rank in (0, 1)
    ]
    assert [rank.wait(60) for rank in ranks] == [0, 0]
    [report] = stager.stage_out(final=True)
    assert (report.files, report.bytes) == (2, 2000)
    for rank in (0, 1):
        body = s3.client().get_object(Bucket="results", Key=f"run1/rank{rank}/checkpoint.bin")
        assert body["Body"].read() == bytes([rank]) * 1000
    totals = {(r.direction, r.local): r for r in stager.reports()}
    assert totals[("in", "data")].files == len(TREE)
    assert totals[("out", "out")].as_dict()["bytes"] == 2000


def test_periodic_stage_out_picks_up_new_files(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    stager = _stager(parse_pairs(["ckpt=s3://results/ckpt"], "--stage-out"), s3.env(), tmp_path)
    (tmp_path / "ckpt").mkdir()
    stager.start_periodic(0.2)
    try:
        for step in range(3):
            (tmp_path / f"ckpt/step{step}.pt").write_bytes(b"x" * (step + 1))
            _wait_for_key(s3, "results", f"ckpt/step{step}.pt")
    finally:
        stager.stop_periodic()
    [final] = stager.stage_out(final=True)
    assert (final.files, final.skipped) == (0, 3)
    [total] = stager.reports()
    assert (total.files, total.bytes, total.errors) == (3, 6, ())


def _wait_for_key(s3: S3Server, bucket: str, key: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        listed = s3.client().list_objects_v2(Bucket=bucket, Prefix=key).get("Contents", [])
        if listed:
            return
        time.sleep(0.1)
    raise AssertionError(f"{key} never uploaded")


def test_per_node_outputs_and_a_shared_one(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    pairs = parse_pairs(
        ["logs/{node}=s3://results/logs/{node}/", "shared=s3://results/shared"], "--stage-out"
    )
    for node in (0, 1):
        (tmp_path / f"logs/{node}").mkdir(parents=True)
        (tmp_path / f"logs/{node}/log.txt").write_text(f"node {node}")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared/model.bin").write_bytes(b"m")
    for node in (0, 1):
        _stager(pairs, s3.env(), tmp_path, node_rank=node, nnodes=2).stage_out(final=True)
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="results")["Contents"]]
    assert sorted(keys) == ["logs/0/log.txt", "logs/1/log.txt", "shared/model.bin"]


def test_server_down_before_the_upload(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out/model.bin").write_bytes(b"m" * 1000)
    stager = _stager(parse_pairs(["out=s3://results/run"], "--stage-out"), s3.env(), tmp_path)
    s3.stop()
    started = time.monotonic()
    with pytest.raises(StagingError) as caught:
        stager.stage_out(final=True)
    assert time.monotonic() - started >= FAST.first + FAST.first * FAST.factor  # backed off
    assert caught.value.exit_code == ExitCode.IO_ERROR
    assert "s3://results/run/model.bin" in str(caught.value)
    assert "after 3 attempts" in str(caught.value)
    s3.start()
    assert "Contents" not in s3.client().list_objects_v2(Bucket="results")


def test_server_stopped_in_the_middle_of_a_multipart_upload(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    (tmp_path / "out").mkdir()
    with open(tmp_path / "out/big.bin", "wb") as handle:
        handle.truncate(110 * 2**20)  # s3fs uploads 100 MiB and more in parts
    stager = _stager(parse_pairs(["out=s3://results/run"], "--stage-out"), s3.env(), tmp_path)
    failed: List[BaseException] = []

    def upload() -> None:
        try:
            stager.stage_out(final=True)
        except StagingError as exc:
            failed.append(exc)

    uploader = threading.Thread(target=upload)
    uploader.start()
    _wait_for_multipart(s3)
    s3.stop()
    uploader.join(120)
    assert failed and "s3://results/run/big.bin" in str(failed[0])
    assert "after 3 attempts" in str(failed[0])  # retried with back-off before giving up
    s3.start()
    assert "Contents" not in s3.client().list_objects_v2(Bucket="results")


def _wait_for_multipart(s3: S3Server) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if s3.client().list_multipart_uploads(Bucket="results").get("Uploads"):
            return
        time.sleep(0.02)
    raise AssertionError("no multipart upload started")


@pytest.mark.parametrize("url", ["s3://no-such-bucket/set", "s3://data/no/such/prefix"])
def test_a_missing_bucket_or_prefix_is_66_naming_the_url(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path, url: str
) -> None:
    stager = _stager(parse_pairs([f"data={url}"], "--stage-in"), s3.env(), tmp_path)
    with pytest.raises(MissingInputError) as caught:
        stager.stage_in()
    assert caught.value.exit_code == ExitCode.NO_INPUT
    assert url in str(caught.value)


def test_a_missing_output_bucket_is_66_before_the_job(s3: S3Server, tmp_path: Path) -> None:
    stager = _stager(parse_pairs(["out=s3://no-such-bucket/x"], "--stage-out"), s3.env(), tmp_path)
    with pytest.raises(MissingInputError, match="s3://no-such-bucket/x"):
        stager.preflight()


def test_missing_credentials_are_66_naming_the_variables(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    env = {"AWS_ENDPOINT_URL": s3.endpoint}
    stager = _stager(parse_pairs(["data=s3://data/set"], "--stage-in"), env, tmp_path)
    with pytest.raises(MissingInputError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        stager.stage_in()
    half = {**s3.modelarts_env(), "SECRET_ACCESS_KEY": ""}
    with pytest.raises(MissingInputError, match=r"^SECRET_ACCESS_KEY is not set"):
        _stager(parse_pairs(["data=obs://data/set"], "--stage-in"), half, tmp_path)


def test_obs_through_the_modelarts_variables(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    mappings = parse_pairs(["data=obs://data/set"], "--stage-in")
    mappings += parse_pairs(["out=obs://results/obs-run"], "--stage-out")
    (tmp_path / "out").mkdir()
    (tmp_path / "out/result.txt").write_text("done")
    stager = _stager(mappings, s3.modelarts_env(), tmp_path)
    stager.stage_in()
    stager.stage_out()
    assert _tree(tmp_path / "data") == {name: _digest(body) for name, body in bucket.items()}
    got = s3.client().get_object(Bucket="results", Key="obs-run/result.txt")["Body"].read()
    assert got == b"done"


X2MS = """#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright Huawei Technologies Co., Ltd. 2022-2022. All rights reserved.

PATH_MAPPING_CONFIG = {
    'input': {
        # Add path mapping here for downloading data before training
        # format: <local path>: <obs/s3 path>
        # For example: '/data/dataset/imagenet': 'obs://dataset/imagenet',
        'dataset': 'obs://data/set',
    },
    'output': {
        # Add path mapping here for uploading output after training
        # format: <local path>: <obs/s3 path>
        # For example: './checkpoints': 'obs://outputs/',
        './checkpoints': 'obs://results/x2ms/',
    }
}
"""


def test_x2mindspore_path_mapping_config_drives_the_same(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path
) -> None:
    config = tmp_path / "path_mapping_config.py"
    config.write_text(X2MS)
    stager = _stager(read_path_mapping(config), s3.modelarts_env(), tmp_path)
    stager.stage_in()
    assert _tree(tmp_path / "dataset") == {name: _digest(body) for name, body in bucket.items()}
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints/net.ckpt").write_bytes(b"weights")
    stager.stage_out()
    got = s3.client().get_object(Bucket="results", Key="x2ms/net.ckpt")["Body"].read()
    assert got == b"weights"


def test_an_unknown_scheme_is_64_before_anything(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown URL scheme 'nosuch'") as caught:
        Stager(parse_pairs(["d=nosuch://x/y"], "--stage-in"), {}, launch_dir=tmp_path)
    assert caught.value.exit_code == ExitCode.USAGE


def test_a_large_object_is_read_in_ranges_and_a_changed_one_whole(
    s3: S3Server, bucket: Dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("malaunch.staging.readers.BIG", 100_000)
    monkeypatch.setattr("malaunch.staging.readers.PART", 30_000)
    pairs = parse_pairs(["data=s3://data/set"], "--stage-in")
    [first] = _stager(pairs, s3.env(), tmp_path).stage_in()
    assert _tree(tmp_path / "data") == {name: _digest(body) for name, body in bucket.items()}
    assert first.bytes == sum(TREE.values())

    client = s3.client()
    old = client.head_object(Bucket="data", Key="set/train/part-0.bin")["ETag"]
    body = os.urandom(250_000)
    client.put_object(Bucket="data", Key="set/train/part-0.bin", Body=body)
    # read against the older listing: the first range's If-Match fails, one whole GET follows
    target = _stager(pairs, s3.env(), tmp_path).inputs[0]
    seen = download(
        target.reader, "data/set/train/part-0.bin", tmp_path / "again.bin",
        entry={"size": 300_000, "etag": old}, progress=Progress("t", 300_000, 1),
        url="s3://data/set/train/part-0.bin", retry=FAST, stop=threading.Event(),
    )  # fmt: skip
    assert (tmp_path / "again.bin").read_bytes() == body
    assert seen["size"] == 250_000 and seen["etag"] != old
