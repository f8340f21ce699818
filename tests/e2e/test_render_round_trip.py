"""The round trip of SPEC §11, for every render target: render a job, fabricate what its
operator injects into each pod (malaunch.simulate.operators), run the installed ``malaunch
topology`` in each pod's environment, and get back the nodes and ranks the render was asked for.
A MindSpore AscendJob's scheduler pod is no node of the job: it must resolve as the scheduler of
the same worker nodes.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
import yaml

from malaunch.job.success import success_policy
from malaunch.models import Topology
from malaunch.render.manifests import load, render, to_yaml
from malaunch.render.request import RenderRequest
from malaunch.simulate.operators import Pod, inject, localize
from malaunch.testing import clean_env, run_cli

COMMAND = ("python", "train.py")


@dataclasses.dataclass(frozen=True)
class Case:
    target: str
    framework: str
    nodes: int
    nproc: Optional[int]
    source: str  # the topology source auto must pick in every pod
    master: Optional[str]  # the rendezvous address every pod must agree on
    num_ps: int = 0
    scheduler: Optional[str] = None  # a scheduler pod's own address (it is not a node)


CASES = {
    "volcano-torch_ddp": Case("volcano", "torch_ddp", 3, 2, "volcano-tasks", "job-master-0.job"),
    "volcano-tensorflow_ps": Case("volcano", "tensorflow_ps", 2, None, "tf-config", None, 2),
    "volcano-mindspore": Case("volcano", "mindspore", 2, 4, "volcano", "job-worker-0.job"),
    "pytorchjob": Case("pytorchjob", "torch_ddp", 3, 4, "kubeflow", "job-master-0"),
    "pytorchjob-1-node": Case("pytorchjob", "torch_ddp", 1, 2, "kubeflow", "job-master-0"),
    "tfjob": Case("tfjob", "tensorflow_ps", 3, None, "tf-config", None, 1),
    "ascendjob-torch_ddp": Case("ascendjob", "torch_ddp", 2, 8, "mindx-pytorch", "10.96.0.10"),
    # The workers reach the scheduler through its Service; the scheduler pod sees its own IP.
    "ascendjob-mindspore": Case(
        "ascendjob", "mindspore", 3, 8, "mindx", "10.96.0.10", scheduler="10.244.0.2"
    ),
    "ascendjob-mindspore-1-npu": Case(
        "ascendjob", "mindspore", 1, 1, "mindx", "10.96.0.10", scheduler="10.244.0.2"
    ),
}


def request(case: Case) -> RenderRequest:
    args: Tuple[str, ...] = ("--framework", case.framework)
    if case.nproc is not None:
        args += ("--nproc-per-node", str(case.nproc))
    return RenderRequest(
        target=case.target, framework=case.framework, nodes=case.nodes, image="img:1",
        command=COMMAND, launcher_args=args, nproc_per_node=case.nproc,
        num_ps=case.num_ps or 1, name="job",
    )  # fmt: skip


def pods(case: Case) -> Tuple[List[Pod], List[str]]:
    """The job's pods (from the YAML, read back) and each container's malaunch options."""
    documents = list(yaml.safe_load_all(to_yaml(render(request(case)))))
    manifests = load(documents)
    job = documents[-1]["spec"]
    tasks = job.get("tasks") or next(
        job[key] for key in ("pytorchReplicaSpecs", "tfReplicaSpecs", "replicaSpecs") if key in job
    )
    first = tasks[0] if isinstance(tasks, list) else next(iter(tasks.values()))
    command: List[str] = first["template"]["spec"]["containers"][0]["command"]
    return inject(manifests), command[1 : command.index("--")]


def topology_options(launcher: List[str]) -> List[str]:
    """The options of the container's command that ``malaunch topology`` takes too."""
    kept: List[str] = []
    for name in ("--nproc-per-node", "--topology"):
        if name in launcher:
            kept += [name, launcher[launcher.index(name) + 1]]
    return kept


def expected_ranks(case: Case, number: int) -> List[int]:
    if case.framework == "tensorflow_ps":  # one process per task, ranks for workers only
        worker = number - case.num_ps
        return [worker] if worker >= 0 else []
    per_node = case.nproc or 1
    return list(range(number * per_node, (number + 1) * per_node))


def resolve(pod: Pod, launcher: List[str], tmp_path: Path) -> Dict[str, Any]:
    """``malaunch topology --json`` in the pod's environment."""
    env = clean_env({**localize(pod, tmp_path), "MALAUNCH_VOLCANO_DIR": str(tmp_path / "x")})
    result = run_cli(["topology", "--json", *topology_options(launcher)], env=env)
    assert result.code == 0, f"{pod.name}: {result.stderr}"
    topo: Dict[str, Any] = json.loads(result.stdout)
    return topo


@pytest.mark.parametrize("name", CASES)
def test_every_pod_resolves_to_the_job_the_render_asked_for(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    pod_list, launcher = pods(case)
    schedulers = [pod for pod in pod_list if pod.task == "scheduler"]
    assert len(schedulers) == (case.scheduler is not None)
    nodes = [pod for pod in pod_list if pod.task != "scheduler"]  # placed after the scheduler
    assert len(nodes) == case.nodes + case.num_ps
    expected = [expected_ranks(case, n) for n in range(len(nodes))]
    seen: List[Dict[str, Any]] = []
    for pod in pod_list:
        topo = resolve(pod, launcher, tmp_path)
        assert topo["source"] == case.source, pod.name
        ranks = [[d["rank"] for d in node["devices"]] for node in topo["nodes"]]
        assert ranks == expected, pod.name
        if pod.task == "scheduler":
            assert topo["task"] == {"role": "scheduler", "index": 0}, pod.name
            assert topo["master_addr"] == case.scheduler, pod.name
            continue
        assert topo["node_rank"] == pod.number - len(schedulers), pod.name
        if schedulers:
            assert topo["task"] == {"role": "worker", "index": pod.index}, pod.name
            assert topo["roles"]["scheduler"] == [f"{case.master}:2222"], pod.name
        seen.append(topo)
    world = case.nodes if case.framework == "tensorflow_ps" else case.nodes * (case.nproc or 1)
    assert {sum(len(n["devices"]) for n in topo["nodes"]) for topo in seen} == {world}
    masters = {topo["master_addr"] for topo in seen}
    assert len(masters) == 1
    if case.master is not None:
        assert masters == {case.master}


def test_the_trap_without_the_new_sources(tmp_path: Path) -> None:
    """The same Volcano pod read as the one-task job the old source saw: the master is lost."""
    pod_list, _ = pods(CASES["volcano-torch_ddp"])
    env = clean_env({**pod_list[1].env, "MALAUNCH_VOLCANO_DIR": str(tmp_path)})
    result = run_cli(["topology", "--json", "--topology", "volcano"], env=env)
    topo = json.loads(result.stdout)
    assert (len(topo["nodes"]), topo["node_rank"]) == (2, 0)  # 3 pods, this one is node 1


@pytest.mark.parametrize("target", ["tfjob", "volcano"])
def test_a_rendered_chief_is_every_pods_chief(target: str, tmp_path: Path) -> None:
    """--chief: the TFJob Chief replica or the Volcano chief task is the chief every pod's
    TF_CONFIG names, node 0 and rank 0, so every launcher takes the chief success policy."""
    req = RenderRequest(
        target=target, framework="tensorflow_ps", nodes=2, image="img:1", command=COMMAND,
        launcher_args=("--framework", "tensorflow_ps"), num_ps=1, name="job", chief=True,
    )  # fmt: skip
    pod_list = inject(load(list(yaml.safe_load_all(to_yaml(render(req))))))
    assert [(pod.task, pod.index) for pod in pod_list] == [
        ("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1),
    ]  # fmt: skip
    for number, pod in enumerate(pod_list):
        topo = resolve(pod, [], tmp_path)
        assert (topo["source"], topo["node_rank"]) == ("tf-config", number), pod.name
        assert topo["task"] == {"role": pod.task, "index": pod.index}
        assert list(topo["roles"]) == ["chief", "ps", "worker"]
        assert [[d["rank"] for d in node["devices"]] for node in topo["nodes"]] == [
            [0], [], [1], [2],
        ]  # fmt: skip
        assert success_policy(Topology.model_validate(topo), None) == "chief"
