"""Stage-in from a loopback S3 server: malaunch's engine against s3fs and boto3, in one run.

    .venv/bin/python benchmarks/bench_staging.py [--files 256] [--mib 1024] [--reps 3]
        [--workers 16]

Starts moto's S3 server (``moto_server``, from ``moto[server]``) on 127.0.0.1 in its own
process, fills a bucket with ``--mib`` MiB in ``--files`` files under two levels of folders,
then times, ``--reps`` times in turn (each one first in turn, after an ``os.sync()``), each
into a fresh folder:

- **malaunch**: ``Stager(...).stage_in()`` (listing, manifest, lock, temporary names, renames);
- **s3fs get**: ``S3FileSystem.get(prefix, folder, recursive=True)`` (its default batch);
- **boto3 TransferManager**: one listing, then ``s3transfer``'s ``TransferManager.download``
  of every key with the listed size (so it needs no HEAD per object), ``max_concurrency``
  = ``--workers``.

Then a second ``stage_in`` into the first malaunch folder with nothing changed, which must
transfer 0 bytes. Prints the median wall time of each, the benchmark process's CPU time (all
its threads: the client's cost, which varies less than wall time on a busy machine; the
server runs in another process) and the moto server's peak memory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import boto3
import s3fs
from botocore.config import Config
from s3transfer.manager import TransferConfig, TransferManager

from malaunch.staging import RetryPolicy, Stager, parse_pairs

KEY, SECRET = "AKIABENCH", "bench-secret"
BUCKET = "bench"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    binary = Path(sys.executable).with_name("moto_server")
    server = subprocess.Popen(
        [str(binary), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("moto_server did not start")


def client(endpoint: str, workers: int) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
        config=Config(max_pool_connections=max(10, workers)),
    )


def fill(s3: Any, files: int, mib: int) -> int:
    """``files`` objects of about ``mib``/``files`` MiB each (sizes vary by a few KiB)."""
    s3.create_bucket(Bucket=BUCKET)
    each = mib * 2**20 // files
    block = os.urandom(each + 64 * 1024)
    total = 0
    for index in range(files):
        size = each + (index % 7) * 4096 - 12288
        key = f"set/d{index % 8}/e{index % 3}/f{index:05d}.bin"
        s3.put_object(Bucket=BUCKET, Key=key, Body=block[index % 1000 : index % 1000 + size])
        total += size
    return total


def with_malaunch(endpoint: str, workers: int) -> Callable[[Path], int]:
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET}

    def run(folder: Path) -> int:
        pairs = parse_pairs([f"data=s3://{BUCKET}/set"], "--stage-in")
        stager = Stager(pairs, env, launch_dir=folder, workers=workers, retry=RetryPolicy())
        return sum(report.bytes for report in stager.stage_in())

    return run


def with_s3fs(endpoint: str) -> Callable[[Path], int]:
    def run(folder: Path) -> int:
        fs = s3fs.S3FileSystem(
            key=KEY, secret=SECRET, endpoint_url=endpoint, skip_instance_cache=True
        )
        fs.get(f"{BUCKET}/set/", str(folder / "data") + "/", recursive=True)
        return sum(p.stat().st_size for p in (folder / "data").rglob("*") if p.is_file())

    return run


def with_transfer_manager(endpoint: str, workers: int) -> Callable[[Path], int]:
    class Size:  # an s3transfer subscriber that gives the listed size: no HEAD per object
        def __init__(self, size: int) -> None:
            self.size = size

        def on_queued(self, future: Any, **kwargs: Any) -> None:
            future.meta.provide_transfer_size(self.size)

    def run(folder: Path) -> int:
        s3 = client(endpoint, workers)
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="set/")
        objects = [o for page in pages for o in page.get("Contents", [])]
        config = TransferConfig(max_request_concurrency=workers)
        futures = []
        with TransferManager(s3, config) as manager:
            for item in objects:
                target = folder / "data" / item["Key"][len("set/") :]
                target.parent.mkdir(parents=True, exist_ok=True)
                futures.append(
                    manager.download(
                        BUCKET, item["Key"], str(target), subscribers=[Size(item["Size"])]
                    )
                )
            for future in futures:
                future.result()
        return sum(int(o["Size"]) for o in objects)

    return run


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=256)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--only", default="", help="comma-separated: malaunch,s3fs,boto3")
    args = parser.parse_args()
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = start_server(port)
    work = Path(tempfile.mkdtemp(prefix="bench-staging-"))
    try:
        total = fill(client(endpoint, args.workers), args.files, args.mib)
        print(f"{args.files} files, {total / 2**30:.3f} GiB on moto_server (pid {server.pid})")
        runners = {
            "malaunch stage_in": with_malaunch(endpoint, args.workers),
            "s3fs get(recursive=True)": with_s3fs(endpoint),
            "boto3 TransferManager": with_transfer_manager(endpoint, args.workers),
        }
        wanted = [w for w in args.only.split(",") if w] or ["malaunch", "s3fs", "boto3"]
        names = [n for n in runners if n.split()[0] in wanted]
        times: Dict[str, List[float]] = {name: [] for name in names}
        cpu: Dict[str, List[float]] = {name: [] for name in names}
        served: Dict[str, List[float]] = {name: [] for name in names}
        for rep in range(args.reps):
            for name in names[rep % len(names) :] + names[: rep % len(names)]:  # first in turn
                run = runners[name]
                folder = work / f"{rep}-{name.split()[0]}"
                os.sync()  # the last run's writeback must not land in this one's time
                started, used = time.perf_counter(), time.process_time()
                server_used = cpu_seconds(server.pid)
                got = run(folder)
                times[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - used)
                served[name].append(cpu_seconds(server.pid) - server_used)
                assert got == total, (name, got, total)
                if not (rep == 0 and name.startswith("malaunch")):
                    shutil.rmtree(folder)
        first = work / "0-malaunch"
        os.sync()
        started = time.perf_counter()
        again = with_malaunch(endpoint, args.workers)(first)
        second = time.perf_counter() - started
        rss = peak_rss_mib(server.pid)
        report(times, cpu, served, total=total, second_run=(again, second), rss=rss)
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)


def report(
    times: Dict[str, List[float]],
    cpu: Dict[str, List[float]],
    served: Dict[str, List[float]],
    *,
    total: int,
    second_run: Tuple[int, float],
    rss: float,
) -> None:
    head = f"stage-in of {total / 2**30:.2f} GiB"
    print(f"\n| {head} | median | runs | rate | client CPU | server CPU |")
    print("|---|---|---|---|---|---|")
    for name, runs in times.items():
        median = statistics.median(runs)
        spread = ", ".join(f"{t:.2f}" for t in runs)
        used, server = statistics.median(cpu[name]), statistics.median(served[name])
        rate = total / median / 2**20
        print(
            f"| {name} | {median:.2f} s | {spread} | {rate:.0f} MiB/s | {used:.2f} s "
            f"| {server:.2f} s |"
        )
    again, second = second_run
    print(f"| malaunch stage_in, nothing changed | {second:.2f} s | {again} bytes | | | |")
    print(f"\nmoto_server peak RSS: {rss:.0f} MiB")
    if again:
        raise SystemExit("the second stage-in transferred bytes")


if __name__ == "__main__":
    main()
