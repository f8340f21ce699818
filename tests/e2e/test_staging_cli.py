"""Data staging through the installed command, against a real S3 API server on loopback.

A 2-rank job that checks the hashes of what was staged in and writes checkpoints that are
staged out; a second run that downloads nothing; X2MindSpore's path_mapping_config.py driving
the same job; outputs uploaded after a rank fails (its code kept) and after SIGTERM (143);
periodic uploads while the ranks run; the server gone before the final upload (74, one line);
the bad inputs of SPEC §10 (64, 65, 66, before the topology wait and with no rank started);
a 2-node ``simulate`` job whose node launchers share the launch directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
from s3server import S3Server, running_server

from malaunch.testing import clean_env, malaunch_executable, pid_alive, run_cli, run_dir

WORKER = Path(__file__).resolve().parents[1] / "workers" / "staging_rank.py"
TREE = {"train/a.bin": 200_000, "train/deep/b.bin": 3_000, "valid/c.bin": 1, "README": 12}
ERROR = "malaunch: error: "


@pytest.fixture
def s3() -> Iterator[S3Server]:
    yield from running_server()


@pytest.fixture
def bucket(s3: S3Server) -> Dict[str, str]:
    """Bucket ``data`` with :data:`TREE` under ``set/``, an empty bucket ``results``; the
    expected sha256 of each file."""
    client = s3.client()
    client.create_bucket(Bucket="data")
    client.create_bucket(Bucket="results")
    expected = {}
    for name, size in TREE.items():
        body = os.urandom(size)
        client.put_object(Bucket="data", Key=f"set/{name}", Body=body)
        expected[name] = hashlib.sha256(body).hexdigest()
    return expected


def launch(tmp: Path, *options: str, worker: Sequence[str] = (), nproc: int = 2) -> List[str]:
    return [
        "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", str(nproc),
        "--log-dir", str(tmp / "logs"), "--grace-period", "3", *options,
        "--", sys.executable, "-S", str(WORKER), *worker,
    ]  # fmt: skip


STAGE = ("--stage-in", "data=s3://data/set", "--stage-out", "out=s3://results/run1")


def env_of(s3: S3Server, expected: Dict[str, str], **extra: str) -> Dict[str, str]:
    return clean_env({**s3.env(), "EXPECTED": json.dumps(expected), **extra})


def summary(tmp: Path, node: Optional[int] = None) -> Dict[str, Any]:
    logs = run_dir(tmp / "logs") if node is None else run_dir(tmp / "logs") / f"node-{node}"
    data: Dict[str, Any] = json.loads((logs / "malaunch-summary.json").read_text())
    return data


def uploaded(s3: S3Server, prefix: str) -> Dict[str, bytes]:
    client = s3.client()
    listing = client.list_objects_v2(Bucket="results", Prefix=prefix).get("Contents", [])
    return {
        item["Key"]: client.get_object(Bucket="results", Key=item["Key"])["Body"].read()
        for item in listing
    }


def checkpoints(prefix: str, ranks: int = 2) -> Dict[str, bytes]:
    return {f"{prefix}/rank{r}/checkpoint.bin": bytes([r]) * 1000 for r in range(ranks)}


def test_a_job_between_stage_in_and_stage_out_then_a_second_run_downloads_nothing(
    s3: S3Server, bucket: Dict[str, str], tmp_path: Path
) -> None:
    env = env_of(s3, bucket)
    first = run_cli(launch(tmp_path, *STAGE), env=env, cwd=tmp_path, timeout=120)
    assert first.code == 0, first.stderr
    assert "rank 0: 4 inputs as expected" in first.stdout
    assert uploaded(s3, "run1/") == checkpoints("run1")
    staging = summary(tmp_path)["staging"]
    assert staging["stage_in"]["files"] == len(TREE)
    assert staging["stage_in"]["bytes"] == sum(TREE.values())
    assert staging["stage_out"]["files"] == 2
    assert staging["stage_out"]["mappings"][0]["url"] == "s3://results/run1"
    assert "stage-in data <- s3://data/set: 4 files" in first.stderr

    second = run_cli(launch(tmp_path, *STAGE), env=env, cwd=tmp_path, timeout=120)
    assert second.code == 0, second.stderr
    again = summary(tmp_path)["staging"]
    assert (again["stage_in"]["files"], again["stage_in"]["bytes"]) == (0, 0)
    assert again["stage_in"]["mappings"][0]["skipped"] == len(TREE)
    # nothing moved, and it says so: silence would leave "did the stage-in run at all?" open
    said = [line for line in second.stderr.splitlines() if "stage-in" in line]
    assert said == ["malaunch: info: stage-in: 4 files up to date, 0 B transferred"]


X2MS = """# X2MindSpore's x2ms_adapter/modelarts/path_mapping_config.py, as users edit it
PATH_MAPPING_CONFIG = {
    'input': {
        # format: <local path>: <obs/s3 path>
        'dataset': 'obs://data/set',
    },
    'output': {
        './checkpoints': 'obs://results/x2ms/',
    }
}
"""


def test_x2mindspore_path_mapping_drives_the_same_job(
    s3: S3Server, bucket: Dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "path_mapping_config.py").write_text(X2MS)
    env = clean_env({**s3.modelarts_env(), "EXPECTED": json.dumps(bucket)})
    args = launch(tmp_path, "--path-mapping", "path_mapping_config.py",
                  worker=["--data", "dataset", "--out", "checkpoints"])  # fmt: skip
    result = run_cli(args, env=env, cwd=tmp_path, timeout=120)
    assert result.code == 0, result.stderr
    assert uploaded(s3, "x2ms/") == checkpoints("x2ms")


def test_outputs_are_uploaded_after_a_rank_fails_and_its_code_is_kept(
    s3: S3Server, bucket: Dict[str, str], tmp_path: Path
) -> None:
    # Both ranks exit 3, but not before rank 0's checkpoint is written: a rank that failed
    # first would otherwise stop rank 0 before it has anything to upload.
    worker = ["--exit", "3", "--wait", "out/rank0/checkpoint.bin"]
    result = run_cli(
        launch(tmp_path, *STAGE, worker=worker),
        env=env_of(s3, bucket),
        cwd=tmp_path,
        timeout=120,
    )
    assert result.code == 3, result.stderr
    assert summary(tmp_path)["exit_code"] == 3
    assert uploaded(s3, "run1/").keys() >= {"run1/rank0/checkpoint.bin"}


def wait_for(condition: Any, what: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"malaunch ended ({proc.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def start(args: List[str], env: Dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [malaunch_executable(), *args], env=env, cwd=cwd, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def local_checkpoints(tmp: Path) -> bool:
    return all((tmp / "out" / f"rank{r}" / "checkpoint.bin").exists() for r in (0, 1))


def test_outputs_are_uploaded_after_sigterm_and_the_launcher_exits_143(
    s3: S3Server, bucket: Dict[str, str], tmp_path: Path
) -> None:
    never = str(tmp_path / "never")
    proc = start(launch(tmp_path, *STAGE, worker=["--wait", never]), env_of(s3, bucket), tmp_path)
    wait_for(lambda: local_checkpoints(tmp_path), "the checkpoints", proc)
    proc.send_signal(signal.SIGTERM)
    done = finish(proc)
    assert done.returncode == 143, done.stderr
    assert uploaded(s3, "run1/") == checkpoints("run1")
    ranks = [entry["pid"] for entry in summary(tmp_path)["processes"]]
    assert len(ranks) == 2 and not any(pid_alive(pid) for pid in ranks)


def test_periodic_uploads_while_the_ranks_run(
    s3: S3Server, bucket: Dict[str, str], tmp_path: Path
) -> None:
    flag = tmp_path / "flag"
    args = launch(tmp_path, *STAGE, "--sync-interval", "0.2", worker=["--wait", str(flag)])
    proc = start(args, env_of(s3, bucket), tmp_path)
    try:
        wait_for(lambda: len(uploaded(s3, "run1/")) == 2, "a periodic upload", proc)
    finally:
        flag.touch()
    done = finish(proc)
    assert done.returncode == 0, done.stderr
    assert uploaded(s3, "run1/") == checkpoints("run1")


def test_the_server_gone_before_the_final_upload_is_74(
    s3: S3Server, bucket: Dict[str, str], tmp_path: Path
) -> None:
    flag = tmp_path / "flag"
    proc = start(
        launch(tmp_path, *STAGE, worker=["--wait", str(flag)]), env_of(s3, bucket), tmp_path
    )
    try:
        wait_for(lambda: local_checkpoints(tmp_path), "the checkpoints", proc)
        s3.stop()
    finally:
        flag.touch()
    done = finish(proc)
    assert done.returncode == 74, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith(ERROR)]
    assert len(errors) == 1 and "s3://results/run1" in errors[0], done.stderr
    assert summary(tmp_path)["exit_code"] == 74
    assert summary(tmp_path)["staging"]["stage_out"]["errors"]
    s3.start()
    assert uploaded(s3, "run1/") == {}  # nothing half-written


def test_dry_run_shows_the_mappings(tmp_path: Path) -> None:
    result = run_cli(["--dry-run", *launch(tmp_path, *STAGE)], cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["staging"] == [
        {"local": "data", "url": "s3://data/set", "direction": "in"},
        {"local": "out", "url": "s3://results/run1", "direction": "out"},
    ]


# A launch that would wait 60 s for its rank table: a bad mapping must be refused before.
WAITING = ("--topology", "ranktable", "--wait-timeout", "60")


@pytest.mark.parametrize(
    ("options", "env", "code", "culprit"),
    [
        (("--stage-in", "data=nosuch://x/y"), {}, 64, "unknown URL scheme 'nosuch'"),
        (("--stage-in", "data"), {}, 64, "--stage-in 'data': expected LOCAL=URL"),
        ((), {"MALAUNCH_STAGE_OUT": "out"}, 64, "MALAUNCH_STAGE_OUT 'out'"),
        (("--stage-out", "o{gpu}=s3://results/x"), {}, 64, "unknown placeholder {gpu}"),
        (("--path-mapping", "missing.py"), {}, 66, "missing.py"),
        (("--path-mapping", "bad.py"), {}, 65, "bad.py"),
        (("--path-mapping", "mapping.yaml"), {}, 64, "expected a .py, .json or .toml file"),
    ],
)
def test_bad_mappings_are_refused_before_the_topology_wait(
    options: List[str], env: Dict[str, str], code: int, culprit: str, tmp_path: Path
) -> None:
    (tmp_path / "bad.py").write_text("PATH_MAPPING_CONFIG = {'input': {'a': open('x')}}\n")
    (tmp_path / "mapping.yaml").write_text("input: {}\n")
    env = clean_env({"RANK_TABLE_FILE": str(tmp_path / "later.json"), **env})
    result = run_cli(launch(tmp_path, *WAITING, *options), env=env, cwd=tmp_path, timeout=30)
    assert result.code == code, result.stderr
    assert result.stderr.startswith(ERROR) and len(result.stderr.splitlines()) == 1
    assert culprit in result.stderr


MISSING = {
    "bucket": (("--stage-in", "data=s3://nosuchbucket/set"), "", "s3://nosuchbucket/set"),
    "prefix": (("--stage-in", "data=s3://data/nosuchprefix"), "", "s3://data/nosuchprefix"),
    "output-bucket": (("--stage-out", "out=s3://nosuchbucket/x"), "", "s3://nosuchbucket"),
    "credentials": (("--stage-in", "data=s3://data/set"), "AWS_SECRET_ACCESS_KEY",
                    "AWS_SECRET_ACCESS_KEY"),
}  # fmt: skip


@pytest.mark.parametrize("case", MISSING.values(), ids=MISSING.keys())
def test_missing_buckets_prefixes_and_credentials_are_66_and_start_nothing(
    s3: S3Server, bucket: Dict[str, str], case: Tuple[Sequence[str], str, str], tmp_path: Path
) -> None:
    mapping, strip, culprit = case
    env = env_of(s3, bucket)
    if strip:
        env.pop(strip)
    result = run_cli(launch(tmp_path, *mapping), env=env, cwd=tmp_path, timeout=120)
    assert result.code == 66, result.stderr
    errors = result.stderr.splitlines()
    assert len(errors) == 1 and errors[0].startswith(ERROR) and culprit in errors[0], result.stderr
    assert not list((tmp_path / "logs").glob("worker-*.log"))  # no rank started


def test_two_simulated_nodes_sharing_the_launch_directory(
    s3: S3Server, bucket: Dict[str, str], tmp_path: Path
) -> None:
    args = [
        "simulate", "--nodes", "2", "--platform", "volcano", "--log-dir", str(tmp_path / "logs"),
        "--framework", "torch_ddp", "--nproc-per-node", "1", "--grace-period", "3",
        "--stage-in", "data=s3://data/set",
        "--stage-out", "out=s3://results/shared",  # shared: node 0 uploads it
        # each node its own: node-<k>/ of the simulation's run, which `latest` names by then
        "--stage-out", "logs/latest/node-{node}=s3://results/logs/node{node}",
        "--", sys.executable, "-S", str(WORKER),
    ]  # fmt: skip
    result = run_cli(args, env=env_of(s3, bucket), cwd=tmp_path, timeout=180)
    assert result.code == 0, result.stderr
    nodes = [summary(tmp_path, node)["staging"] for node in (0, 1)]
    # One directory, two launchers: every file came over once, whichever node fetched it.
    assert sum(node["stage_in"]["files"] for node in nodes) == len(TREE)
    assert uploaded(s3, "shared/") == checkpoints("shared")
    for node in (0, 1):
        logs = uploaded(s3, f"logs/node{node}/")
        assert f"logs/node{node}/worker-{node}.log" in logs, sorted(logs)
    assert [m["local"] for m in nodes[1]["stage_out"]["mappings"]] == ["logs/latest/node-1"]


class Watched:
    """A started launcher whose stderr is read as it comes (to act on a line)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: List[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def end(self, timeout: float) -> int:
        """The exit code; killed (and the test failed) past ``timeout``: it would hang."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail(f"malaunch still running {timeout} s on:\n{''.join(self.lines)}")
        finally:
            self.reader.join(5)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()


def test_sigterm_while_stage_in_retries_stops_it_and_starts_nothing(
    s3: S3Server, bucket: Dict[str, str], tmp_path: Path
) -> None:
    s3.stop()  # every request fails: the stage-in waits 1, 2, 4, 8 s between its tries
    watched = Watched(start(launch(tmp_path, *STAGE), env_of(s3, bucket), tmp_path))
    wait_for(lambda: watched.saw("retrying in"), "a retry", watched.proc)
    watched.proc.send_signal(signal.SIGTERM)
    assert watched.end(timeout=6) == 143, "".join(watched.lines)
    assert watched.saw("stage-in stopped by SIGTERM")
    assert not list((tmp_path / "logs").glob("worker-*.log"))  # no rank started
    assert not list(tmp_path.rglob("*.malaunch-partial"))


def test_a_second_sigterm_stops_a_final_upload_that_keeps_failing(
    s3: S3Server, bucket: Dict[str, str], tmp_path: Path
) -> None:
    flag = tmp_path / "flag"
    args = launch(tmp_path, *STAGE, worker=["--wait", str(flag)])
    watched = Watched(start(args, env_of(s3, bucket), tmp_path))
    try:
        wait_for(lambda: local_checkpoints(tmp_path), "the checkpoints", watched.proc)
        s3.stop()
    finally:
        flag.touch()
    wait_for(lambda: watched.saw("retrying in"), "the final upload's retries", watched.proc)
    watched.proc.send_signal(signal.SIGTERM)  # the upload gets 10 s more...
    wait_for(lambda: watched.saw("SIGTERM: staging stops in 10s"), "the deadline", watched.proc)
    watched.proc.send_signal(signal.SIGTERM)  # ...and a second signal ends it now
    assert watched.end(timeout=6) == 74, "".join(watched.lines)
    assert summary(tmp_path)["exit_code"] == 74
    assert summary(tmp_path)["staging"]["stage_out"]["errors"]
