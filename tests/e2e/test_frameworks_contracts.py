"""Real clients of the contracts malaunch promises (issue 19), not scripts shaped to malaunch:

- a worker's environment under native torch_ddp against the same worker under real torchrun,
  row by row of docs/plugins.md's table, and ``is_torchelastic_launched()``;
- PyTorch Lightning's ``Trainer(strategy="ddp", num_nodes=2, devices=2)`` under ``simulate``:
  it must find torchrun's environment and start no process itself;
- a torch script decorated with ``@record`` that raises: its structured error in the summary of
  every node and in ``malaunch report``;
- TensorFlow 2's ``ParameterServerStrategy`` as TensorFlow's tutorial writes it (workers and ps
  that ``join()`` forever): under ``simulate --chief`` and under four hand-started launchers
  with TFJob's ``TF_CONFIG``, every launcher exits 0 once the chief has succeeded.

Needs torch, pytorch-lightning and tensorflow (``pip install '.[test,torch,tensorflow]'``):
without them these tests fail, they do not skip.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from launchers import Launchers, NodeCommand, node_dir

from malaunch.testing import clean_env, malaunch_executable, run_cli, run_dir, wait_gone
from ports import Reservations

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
WORKERS = ROOT / "tests" / "workers"
TABLE_HEAD = "| variable | torchrun 2.13 | malaunch native | malaunch delegate |"


def need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed in {sys.executable}: pip install '.[test,torch]'")


def launch_env() -> Dict[str, str]:
    """A clean environment without any variable of torchrun's contract already set."""
    env = clean_env()
    for name in list(env):
        if name.startswith(("TORCHELASTIC_", "TORCH_NCCL")) or name == "OMP_NUM_THREADS":
            del env[name]
    return env


def contract_table() -> Dict[str, Tuple[str, str]]:
    """docs/plugins.md's table: variable -> (torchrun's value, native mode's)."""
    lines = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(TABLE_HEAD) + 2
    rows: Dict[str, Tuple[str, str]] = {}
    for line in lines[start:]:
        if not line.startswith("| `"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def dumps(out: Path) -> Dict[int, Dict[str, Any]]:
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("env-*.json")}


def test_native_mode_gives_a_worker_what_torchrun_gives_it(
    tmp_path: Path, free_port: Reservations
) -> None:
    need("torch")
    env, port = launch_env(), free_port()
    script = str(WORKERS / "torch_env_dump.py")
    by_torchrun, by_malaunch, logs = tmp_path / "torchrun", tmp_path / "native", tmp_path / "logs"
    by_torchrun.mkdir()
    by_malaunch.mkdir()
    native = run_cli(
        ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2",
         "--master-port", str(port), "--log-dir", str(logs), "--",
         sys.executable, script, str(by_malaunch)],
        env=env, timeout=180,
    )  # fmt: skip
    assert native.code == 0, native.stderr
    torchrun = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--nnodes", "1",
         "--master-addr", "127.0.0.1", "--master-port", str(port), script, str(by_torchrun)],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert torchrun.returncode == 0, torchrun.stderr
    table = contract_table()
    theirs, ours = dumps(by_torchrun), dumps(by_malaunch)
    assert sorted(theirs) == sorted(ours) == [0, 1]
    for rank in (0, 1):
        given, got = theirs[rank]["environ"], ours[rank]["environ"]
        assert theirs[rank]["is_torchelastic_launched"] is True
        assert ours[rank]["is_torchelastic_launched"] is True
        # torchrun sets nothing the table does not list
        added = {k for k, v in given.items() if env.get(k) != v}
        assert added <= set(table), sorted(added - set(table))
        for name, (_, native_value) in table.items():
            if native_value.startswith("same"):
                assert got.get(name) == given.get(name), name
        # where the table says why not
        assert (given["TORCHELASTIC_USE_AGENT_STORE"], got["TORCHELASTIC_USE_AGENT_STORE"]) == (
            "True",
            "False",
        )
        assert given["TORCHELASTIC_ERROR_FILE"].endswith(f"/attempt_0/{rank}/error.json")
        assert got["TORCHELASTIC_ERROR_FILE"] == str(run_dir(logs) / f"worker-{rank}.error.json")
        assert "TORCHELASTIC_SIGNALS_TO_HANDLE" in given
        assert "TORCHELASTIC_SIGNALS_TO_HANDLE" not in got
        assert ("NODE_RANK" in given, got["NODE_RANK"]) == (False, "0")
        job_id = json.loads((run_dir(logs) / "malaunch-run.json").read_text())["job_id"]
        assert (given["TORCHELASTIC_RUN_ID"], got["TORCHELASTIC_RUN_ID"]) == ("none", job_id)
        assert job_id.startswith("malaunch-")


def node_summary(logs: Path, node: int) -> Dict[str, Any]:
    path = node_dir(logs, node) / "malaunch-summary.json"
    loaded: Dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_lightning_finds_torchrun_and_starts_no_process(tmp_path: Path) -> None:
    need("pytorch_lightning")
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    result = run_cli(
        ["simulate", "--nodes", "2", "--nproc-per-node", "2", "--framework", "torch_ddp",
         "--log-dir", str(logs), "--", sys.executable, str(WORKERS / "lightning_ddp.py"),
         str(out)],
        cwd=tmp_path, timeout=400,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    seen = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("rank-*.json")}
    assert sorted(seen) == [0, 1, 2, 3]
    started = {p["pid"] for node in (0, 1) for p in node_summary(logs, node)["processes"]}
    for rank, rank_seen in seen.items():
        assert rank_seen["environment"] == "TorchElasticEnvironment"
        assert rank_seen["torchelastic"] is True
        assert rank_seen["creates_processes_externally"] is True
        assert rank_seen["is_torchelastic_launched"] is True
        assert (rank_seen["world_size"], rank_seen["global_rank"]) == (4, rank)
        assert (rank_seen["node_rank"], rank_seen["local_rank"]) == divmod(rank, 2)
    # the four processes that trained are the four malaunch started: Lightning spawned none
    assert {rank_seen["pid"] for rank_seen in seen.values()} == started
    assert len({tuple(rank_seen["weights"]) for rank_seen in seen.values()}) == 1


def test_a_recorded_error_is_in_the_summary_of_every_node_and_the_report(tmp_path: Path) -> None:
    need("torch")
    logs = tmp_path / "logs"
    result = run_cli(
        ["simulate", "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano",
         "--framework", "torch_ddp", "--log-dir", str(logs), "--", sys.executable,
         str(WORKERS / "torch_record_fail.py"), "3"],
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert result.code == 1, result.stdout + result.stderr
    error_file = str(node_dir(logs, 1) / "worker-3.error.json")
    failed = node_summary(logs, 1)["first_failure"]
    stopped = node_summary(logs, 0)
    for error in (failed["error"], stopped["job_failure"]["error"], stopped["stopped_by"]["error"]):
        assert error["type"] == "ValueError"
        assert error["message"] == "rank 3 found a NaN in batch 17"
        assert error["frame"].endswith(", in check_batch")
        assert error["frame"].startswith(f'File "{WORKERS / "torch_record_fail.py"}", line ')
        assert error["code"] == 'raise ValueError(f"rank {rank} found a NaN in batch {batch}")'
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", error["timestamp"])
        assert error["file"] == error_file
    assert stopped["exit_code"] == 75
    # node 0's own console shows it too, though the rank died on node 1
    assert (
        f"[node 0] malaunch: info: node 1 rank 3 exited with code 1: its error file "
        f"({error_file}) says:" in result.stdout
    )
    assert "[node 0] malaunch: info:   | ValueError: rank 3 found a NaN in batch 17 (at " in (
        result.stdout
    )
    page = tmp_path / "report.html"
    report = run_cli(["report", str(logs), "--html", str(page)], timeout=60)
    assert report.code == 0, report.stderr
    html = page.read_text()
    assert "<h4>Its error (@record)</h4>" in html
    assert "ValueError: rank 3 found a NaN in batch 17" in html


def test_delegate_mode_reads_the_error_torchrun_copied(
    tmp_path: Path, free_port: Reservations
) -> None:
    """torchrun's own main is decorated with @record: it copies its failed worker's error into
    the error file malaunch gave it."""
    need("torch")
    logs = tmp_path / "logs"
    result = run_cli(
        ["--framework", "torch_ddp", "--torch-mode", "delegate", "--topology", "local",
         "--nproc-per-node", "2", "--master-port", str(free_port()),
         "--log-dir", str(logs), "--", sys.executable, str(WORKERS / "torch_record_fail.py"),
         "1"],
        env=launch_env(), timeout=180,
    )  # fmt: skip
    assert result.code == 1, result.stderr
    run = run_dir(logs)
    error = json.loads((run / "malaunch-summary.json").read_text())["first_failure"]["error"]
    assert (error["type"], error["message"]) == ("ValueError", "rank 1 found a NaN in batch 17")
    assert error["file"] == str(run / "torchrun-node-0.error.json")


def chief_succeeded_at(logs: Path) -> float:
    """When the chief process ended, from node 0's summary."""
    chief = node_summary(logs, 0)["processes"][0]
    assert (chief["role"], chief["exit_code"]) == ("chief", 0)
    return datetime.datetime.fromisoformat(chief["end_time"]).timestamp()


def test_tf2_ps_tutorial_under_simulate_with_a_chief(tmp_path: Path) -> None:
    need("tensorflow")
    logs = tmp_path / "logs"
    result = run_cli(
        ["simulate", "--chief", "--nodes", "2", "--num-ps", "1", "--platform", "tf-ps",
         "--framework", "tensorflow_ps", "--log-dir", str(logs), "--", sys.executable,
         str(WORKERS / "tf2_ps_tutorial.py")],
        cwd=tmp_path, timeout=400,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    assert "[node 0] [chief 0] chief: 10 steps applied on the ps" in result.stdout
    for node, role in ((1, "ps"), (2, "worker"), (3, "worker")):
        summary = node_summary(logs, node)
        (process,) = summary["processes"]
        assert (summary["exit_code"], process["role"], process["signal"]) == (0, role, "SIGTERM")
    chief_succeeded_at(logs)


def tfjob_nodes(tmp_path: Path, free_port: Reservations) -> List[NodeCommand]:
    """Four launchers as a TFJob starts them: TF_CONFIG with chief, ps and two workers."""
    ports = [free_port() for _ in range(5)]  # each reserved, so five different ones
    addresses = [f"127.0.0.1:{port}" for port in ports[:4]]
    cluster = {"chief": addresses[:1], "ps": addresses[1:2], "worker": addresses[2:]}
    tasks = [("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1)]
    nodes = []
    for index, (role, task_index) in enumerate(tasks):
        config = {"cluster": cluster, "task": {"type": role, "index": task_index},
                  "environment": "cloud"}  # fmt: skip
        argv = [
            malaunch_executable(), "--framework", "tensorflow_ps", "--job-port", str(ports[4]),
            "--log-dir", str(tmp_path / "logs" / f"node-{index}"), "--",
            sys.executable, str(WORKERS / "tf2_ps_tutorial.py"),
        ]  # fmt: skip
        nodes.append(NodeCommand(index, {"TF_CONFIG": json.dumps(config)}, argv))
    return nodes


def test_tf2_ps_tutorial_four_launchers_exit_0_once_the_chief_succeeded(
    tmp_path: Path, free_port: Reservations
) -> None:
    need("tensorflow")
    with Launchers(tfjob_nodes(tmp_path, free_port), tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        codes = launchers.wait(timeout=300)
        output = launchers.output()
    assert codes == {0: 0, 1: 0, 2: 0, 3: 0}, output
    assert "chief: 10 steps applied on the ps" in output
    # Before: the chief exited 0 and the other three launchers waited until killed (here: the
    # wait above gave up). Now the chief's success stops the others' servers with SIGTERM.
    chief_succeeded_at(tmp_path / "logs")
    pids = []
    for node in (1, 2, 3):
        (process,) = node_summary(tmp_path / "logs", node)["processes"]
        assert process["signal"] == "SIGTERM"
        pids.append(process["pid"])
    assert wait_gone(pids) == []
