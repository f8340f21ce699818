"""malaunch.context from inside real child processes started by the installed CLI.

Every process runs examples/context_demo.py, which prints its context as one JSON line into
its log file; the tests read the per-process logs through malaunch-summary.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

from malaunch.testing import clean_env, read_summary, run_cli, run_dir
from ports import Reservations

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "context_demo.py"
DATASETS = {"车道线数据": "/data/lane", "full cache": "/data/cache/dataset"}

# Services (ps, scheduler) are stopped once the workers succeed, possibly before they have
# printed anything; so in these tests each worker first waits (bounded) until the service's
# log holds its JSON line, then runs the demo. The demo itself stays a plain example.
WRAPPER = """\
import glob, pathlib, runpy, sys, time
from malaunch import context
demo, service_log = sys.argv[1], sys.argv[2]  # a pattern: the run folder's name is not known
if context.rank is not None and service_log != "-":
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        paths = [pathlib.Path(found) for found in glob.glob(service_log)]
        if any('"role"' in path.read_text(encoding="utf-8") for path in paths):
            break
        time.sleep(0.05)
sys.argv = [demo, *sys.argv[3:]]
runpy.run_path(demo, run_name="__main__")
"""


def run_demo(
    tmp_path: Path,
    launcher_args: Sequence[str],
    service_log: Optional[str] = None,
    extra_env: Optional[Dict[str, str]] = None,
) -> List[Dict[str, Any]]:
    """Launch the demo under ``launcher_args``; return each process's context with its
    role/rank as the supervisor's summary recorded them."""
    log_dir = tmp_path / "logs"
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER, encoding="utf-8")
    service = str(log_dir / "run-*" / service_log) if service_log else "-"
    result = run_cli(
        [*launcher_args, "--log-dir", str(log_dir), "--console-ranks", "none",
         "--", sys.executable, str(wrapper), str(DEMO), service],
        env=clean_env(extra_env), cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    summary = read_summary(log_dir)
    found = []
    for entry in summary["processes"]:
        text = Path(entry["log_file"]).read_text(encoding="utf-8")
        lines = [line for line in text.splitlines() if line.startswith("{")]
        assert len(lines) == 1, f"{entry['log_file']}: {text!r}"
        found.append({"summary": entry, "context": json.loads(lines[0])})
    return found


def test_torch_ddp_two_local_ranks_with_octopus_data(tmp_path: Path) -> None:
    data = {
        "DATASET_MAP": json.dumps(DATASETS, ensure_ascii=False),
        "DATASET": "/data",
        "RESULT": str(tmp_path / "result"),
        "MODEL": str(tmp_path / "model"),
    }
    processes = run_demo(
        tmp_path,
        ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2"],
        extra_env=data,
    )
    contexts = sorted((p["context"] for p in processes), key=lambda c: c["rank"])
    assert [(c["rank"], c["local_rank"], c["device"]) for c in contexts] == [(0, 0, 0), (1, 1, 1)]
    assert [c["is_main"] for c in contexts] == [True, False]
    assert len({c["pid"] for c in contexts}) == 2
    for ctx in contexts:
        assert (ctx["world_size"], ctx["node_rank"], ctx["nnodes"]) == (2, 0, 1)
        assert (ctx["role"], ctx["framework"], ctx["source"]) == ("worker", "torch_ddp", "local")
        assert ctx["datasets"] == DATASETS
        assert ctx["dataset"] == "/data"
        assert ctx["result_dir"] == data["RESULT"]
        assert ctx["model_dir"] == data["MODEL"]
        assert ctx["master_addr"] == "127.0.0.1"
        assert isinstance(ctx["master_port"], int)
    assert contexts[0]["job_id"] == contexts[1]["job_id"] is not None
    for process in processes:
        assert process["summary"]["rank"] == process["context"]["rank"]


def test_tensorflow_ps_local_cluster(tmp_path: Path) -> None:
    processes = run_demo(
        tmp_path,
        ["--framework", "tensorflow_ps", "--num-ps", "1", "--num-workers", "2"],
        service_log="ps-0.log",
        extra_env={"DATASET_MAP": json.dumps(DATASETS)},
    )
    found = {(p["context"]["role"], p["context"]["rank"]) for p in processes}
    assert found == {("ps", None), ("worker", 0), ("worker", 1)}
    assert len(processes) == 3
    ports = set()
    for process in processes:
        ctx = process["context"]
        assert ctx["world_size"] == 2
        assert ctx["framework"] == "tensorflow_ps"
        assert ctx["datasets"] == DATASETS
        assert ctx["is_main"] == (ctx["rank"] == 0)
        ports.add((ctx["master_addr"], ctx["master_port"]))
    assert len(ports) == 1  # every task agrees on the chief (worker 0)


def test_mindspore_dynamic_cluster(tmp_path: Path) -> None:
    processes = run_demo(
        tmp_path,
        ["--framework", "mindspore", "--ms-mode", "dynamic", "--topology", "local",
         "--nproc-per-node", "2"],
        service_log="scheduler.log",
    )  # fmt: skip
    by_role = {(p["context"]["role"], p["context"]["rank"]): p["context"] for p in processes}
    assert set(by_role) == {("scheduler", None), ("worker", 0), ("worker", 1)}
    scheduler = by_role[("scheduler", None)]
    assert scheduler["is_main"] is False and scheduler["device"] is None
    assert [by_role[("worker", r)]["device"] for r in (0, 1)] == [0, 1]
    for ctx in by_role.values():
        assert ctx["world_size"] == 2
        assert ctx["framework"] == "mindspore"
        assert (ctx["master_addr"], ctx["master_port"]) == (
            scheduler["master_addr"],
            scheduler["master_port"],
        )


def test_restart_count_reaches_the_script(tmp_path: Path) -> None:
    code = (
        "import sys; from malaunch import context; "
        "print('attempt', context.restart_count, flush=True); "
        "sys.exit(0 if context.restart_count else 3)"
    )
    log_dir = tmp_path / "logs"
    result = run_cli(
        ["--framework", "torch_ddp", "--topology", "local", "--max-restarts", "1",
         "--log-dir", str(log_dir), "--", sys.executable, "-c", code],
        cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    summary = read_summary(log_dir)
    (entry,) = summary["processes"]
    assert "attempt 1" in Path(entry["log_file"]).read_text(encoding="utf-8")


@pytest.mark.parametrize("bad", ['{"rank": "zero"}', "not json"])
def test_malformed_context_is_a_clear_error_in_the_script(tmp_path: Path, bad: str) -> None:
    """``--env`` wins over the plan, so it can plant a broken MALAUNCH_CONTEXT."""
    result = run_cli(
        ["--framework", "torch_ddp", "--topology", "local", "--env", f"MALAUNCH_CONTEXT={bad}",
         "--log-dir", str(tmp_path / "logs"), "--", sys.executable, str(DEMO)],
        cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 1
    assert "ValueError: malaunch.context: environment variable MALAUNCH_CONTEXT:" in result.stdout


def simulated_contexts(
    tmp_path: Path, args: Sequence[str], service_log: str = "-"
) -> List[Dict[str, Any]]:
    """Run the demo with ``malaunch simulate``; the contexts of every process of every node.
    ``service_log`` is relative to the simulation's log dir."""
    log_dir = tmp_path / "sim"
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER, encoding="utf-8")
    service = str(log_dir / "run-*" / service_log) if service_log != "-" else "-"
    result = run_cli(
        ["simulate", *args, "--log-dir", str(log_dir), "--console-ranks", "none",
         "--", sys.executable, str(wrapper), str(DEMO), service],
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    contexts: List[Dict[str, Any]] = []
    for summary_file in sorted(run_dir(log_dir).glob("node-*/malaunch-summary.json")):
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        for entry in summary["processes"]:
            text = Path(entry["log_file"]).read_text(encoding="utf-8")
            contexts.extend(json.loads(line) for line in text.splitlines() if line.startswith("{"))
    return contexts


def test_simulated_octopus_job_two_nodes_torch_ddp(tmp_path: Path) -> None:
    contexts = simulated_contexts(
        tmp_path,
        ["--nodes", "2", "--nproc-per-node", "2", "--platform", "octopus",
         "--framework", "torch_ddp"],
    )  # fmt: skip
    found = sorted((c["rank"], c["node_rank"], c["local_rank"]) for c in contexts)
    assert found == [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)]
    masters = {(c["master_addr"], c["master_port"]) for c in contexts}
    assert len(masters) == 1
    for ctx in contexts:
        assert (ctx["world_size"], ctx["nnodes"], ctx["source"]) == (4, 2, "volcano")
        # The simulated Octopus node's DATASET_MAP reached the script.
        assert list(ctx["datasets"]) == ["dataset-0"]
        assert ctx["datasets"]["dataset-0"].endswith("dataset-0")
        assert ctx["result_dir"] and ctx["model_dir"]


def test_simulated_modelarts_rank_table_mindspore(tmp_path: Path) -> None:
    contexts = simulated_contexts(
        tmp_path,
        ["--nodes", "2", "--nproc-per-node", "2", "--platform", "modelarts",
         "--ranktable-delay", "0", "--first-device-id", "4", "--framework", "mindspore"],
    )  # fmt: skip
    found = sorted((c["rank"], c["node_rank"], c["device"], c["device_id"]) for c in contexts)
    # In-container index and physical NPU id are both kept: NPUs 4 and 5 appear as 0 and 1.
    assert found == [(0, 0, 0, 4), (1, 0, 1, 5), (2, 1, 0, 4), (3, 1, 1, 5)]
    for ctx in contexts:
        assert (ctx["world_size"], ctx["source"], ctx["framework"]) == (4, "ranktable", "mindspore")
        assert ctx["job_id"].startswith("modelarts-job")


def test_simulated_tf_ps_job_one_node_per_task(tmp_path: Path) -> None:
    contexts = simulated_contexts(
        tmp_path,
        ["--nodes", "2", "--num-ps", "1", "--platform", "tf-ps", "--framework", "tensorflow_ps"],
        service_log="node-0/ps-0.log",
    )
    found = sorted(
        (c["role"], c["node_rank"], -1 if c["rank"] is None else c["rank"]) for c in contexts
    )
    assert found == [("ps", 0, -1), ("worker", 1, 0), ("worker", 2, 1)]
    chief = {(c["master_addr"], c["master_port"]) for c in contexts}
    assert len(chief) == 1
    for ctx in contexts:
        assert (ctx["world_size"], ctx["nnodes"], ctx["source"]) == (2, 3, "tf-ps")


@pytest.mark.frameworks
def test_torch_ddp_delegate_workers_see_their_own_rank(
    tmp_path: Path, free_port: Reservations
) -> None:
    """Under a real torchrun agent started by malaunch, each worker's context carries the rank
    torchrun gave it, and the job-level values (datasets, framework) malaunch gave the agent."""
    log_dir = tmp_path / "logs"
    # A reserved port: torchrun binds it seconds later, when an outgoing connection of a busy
    # host may have been given a port the launcher had found free.
    result = run_cli(
        ["--framework", "torch_ddp", "--torch-mode", "delegate", "--topology", "local",
         "--master-port", str(free_port()),
         "--nproc-per-node", "2", "--log-dir", str(log_dir), "--console-ranks", "none",
         "--", sys.executable, str(DEMO)],
        env=clean_env({"DATASET_MAP": json.dumps(DATASETS)}), cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    text = (run_dir(log_dir) / "torchrun-node-0.log").read_text(encoding="utf-8")
    contexts = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    found = sorted((c["rank"], c["local_rank"], c["device"], c["device_id"]) for c in contexts)
    assert found == [(0, 0, 0, 0), (1, 1, 1, 1)]
    for ctx in contexts:
        assert (ctx["world_size"], ctx["role"], ctx["framework"]) == (2, "worker", "torch_ddp")
        assert ctx["datasets"] == DATASETS
    assert len({c["pid"] for c in contexts}) == 2
