"""What the operators inject into each pod of a rendered job (malaunch.simulate.operators),
checked against the platform conventions (§6 Volcano, §7 Kubeflow and MindX)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

from malaunch.render.k8s import K8sModel
from malaunch.render.manifests import load, render
from malaunch.render.request import RenderRequest
from malaunch.simulate.operators import Network, Pod, inject, localize
from malaunch.simulate.platforms import loopback


def job(target: str, framework: str, nodes: int, nproc: int = 2, **extra: object) -> List[Pod]:
    request = RenderRequest(
        target=target, framework=framework, nodes=nodes, image="img", command=("python", "t.py"),
        nproc_per_node=nproc, name="job", **extra,  # type: ignore[arg-type]
    )  # fmt: skip
    return inject(render(request))


def only(pod: Pod, *names: str) -> Dict[str, str]:
    return {name: pod.env[name] for name in names if name in pod.env}


def test_volcano_pytorch_plugin_layout() -> None:
    pods = job("volcano", "torch_ddp", 3)
    assert [(p.name, p.task, p.index, p.number) for p in pods] == [
        ("job-master-0", "master", 0, 0),
        ("job-worker-0", "worker", 0, 1),
        ("job-worker-1", "worker", 1, 2),
    ]
    names = ("HOSTNAME", "VC_TASK_INDEX", "VK_TASK_INDEX", "RANK", "WORLD_SIZE", "MASTER_ADDR")
    assert only(pods[2], *names, "MASTER_PORT") == {
        "HOSTNAME": "job-worker-1", "VC_TASK_INDEX": "1", "VK_TASK_INDEX": "1",
        "RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "job-master-0.job", "MASTER_PORT": "23456",
    }  # fmt: skip
    assert only(pods[0], "VC_TASK_INDEX", "RANK") == {"VC_TASK_INDEX": "0", "RANK": "0"}
    svc = {k: v for k, v in pods[0].env.items() if k.startswith("VC_") and k != "VC_TASK_INDEX"}
    assert svc == {
        "VC_MASTER_HOSTS": "job-master-0.job", "VC_MASTER_NUM": "1",
        "VC_WORKER_HOSTS": "job-worker-0.job,job-worker-1.job", "VC_WORKER_NUM": "2",
    }  # fmt: skip


def test_volcano_tensorflow_plugin_tf_config_has_no_environment() -> None:
    pods = job("volcano", "tensorflow_ps", 2, num_ps=1)
    config = json.loads(pods[2].env["TF_CONFIG"])
    assert config == {
        "cluster": {
            "ps": ["job-ps-0.job:2222"],
            "worker": ["job-worker-0.job:2222", "job-worker-1.job:2222"],
        },
        "task": {"type": "worker", "index": 1},
    }
    assert "RANK" not in pods[2].env


def test_kubeflow_pytorchjob_rank_is_a_node_rank_world_size_counts_processes() -> None:
    pods = job("pytorchjob", "torch_ddp", 3, nproc=4)
    names = ("MASTER_ADDR", "PET_MASTER_ADDR", "RANK", "PET_NODE_RANK", "WORLD_SIZE")
    assert only(pods[1], *names, "PET_NNODES", "PET_NPROC_PER_NODE", "MASTER_PORT") == {
        "MASTER_ADDR": "job-master-0", "PET_MASTER_ADDR": "job-master-0", "RANK": "1",
        "PET_NODE_RANK": "1", "WORLD_SIZE": "12", "PET_NNODES": "3", "PET_NPROC_PER_NODE": "4",
        "MASTER_PORT": "23456",
    }  # fmt: skip


def test_tfjob_addresses_name_the_namespace() -> None:
    pods = job("tfjob", "tensorflow_ps", 1, namespace="ml")
    config = json.loads(pods[0].env["TF_CONFIG"])
    assert config["cluster"] == {
        "ps": ["job-ps-0.ml.svc:2222"],
        "worker": ["job-worker-0.ml.svc:2222"],
    }
    assert (config["task"], config["environment"]) == ({"type": "ps", "index": 0}, "cloud")


def test_ascendjob_pytorch() -> None:
    pods = job("ascendjob", "torch_ddp", 2, nproc=8)
    names = ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")
    assert only(pods[1], *names, "MASTER_PORT", "ASCEND_VISIBLE_DEVICES") == {
        "RANK": "1", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "LOCAL_RANK": "0,1,2,3,4,5,6,7",
        "MASTER_ADDR": "10.96.0.10", "MASTER_PORT": "2222",
        "ASCEND_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    }  # fmt: skip
    assert pods[0].env["MINDX_TASK_ID"] == pods[1].env["MINDX_TASK_ID"]


def test_ascendjob_mindspore_scheduler_and_workers() -> None:
    pods = job("ascendjob", "mindspore", 2, nproc=8)
    assert [(p.name, p.task, p.index, p.number) for p in pods] == [
        ("job-scheduler-0", "scheduler", 0, 0),
        ("job-worker-0", "worker", 0, 1),
        ("job-worker-1", "worker", 1, 2),
    ]
    names = ("MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_NODE_RANK", "MS_LOCAL_WORKER",
             "MS_WORKER_NUM", "MS_SERVER_NUM", "NPU_POD", "ASCEND_VISIBLE_DEVICES")  # fmt: skip
    assert only(pods[0], *names) == {
        "MS_ROLE": "MS_SCHED", "MS_SCHED_HOST": "10.244.0.2", "MS_SCHED_PORT": "2222",
        "MS_NODE_RANK": "0", "MS_LOCAL_WORKER": "8", "MS_WORKER_NUM": "16",
        "MS_SERVER_NUM": "0", "NPU_POD": "false",
    }  # fmt: skip
    assert only(pods[2], *names) == {
        "MS_ROLE": "MS_WORKER", "MS_SCHED_HOST": "10.96.0.10", "MS_SCHED_PORT": "2222",
        "MS_NODE_RANK": "1", "MS_LOCAL_WORKER": "8", "MS_WORKER_NUM": "16",
        "MS_SERVER_NUM": "0", "NPU_POD": "true", "ASCEND_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    }  # fmt: skip
    assert not any("RANK_TABLE_FILE" in pod.env or pod.files for pod in pods)


def one_npu_workers_only() -> List[K8sModel]:
    """The one MindSpore AscendJob the operator runs without a scheduler (1 NPU in all), with
    the rank-table ConfigMap mounted as MindX's samples do (render writes a Scheduler)."""
    request = RenderRequest(
        target="ascendjob", framework="mindspore", nodes=1, image="img", command=("x",),
        nproc_per_node=1, name="job",
    )  # fmt: skip
    doc = render(request)[-1].to_dict()
    del doc["spec"]["replicaSpecs"]["Scheduler"]
    pod = doc["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    pod["volumes"].append({"name": "rt", "configMap": {"name": "rings-config-job"}})
    pod["containers"][0]["volumeMounts"].append({"name": "rt", "mountPath": "/rt"})
    pod["containers"][0]["env"] = [
        {"name": "RANK_TABLE_FILE", "value": "/rt/hccl.json"},
        {"name": "XDL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
    ]
    config = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rings-config-job"},
        "data": {"hccl.json": '{"status": "initializing"}'},
    }  # fmt: skip
    return load([config, doc])


def test_ascendjob_mindspore_workers_only_get_only_the_rank_table(tmp_path: Path) -> None:
    (pod,) = inject(one_npu_workers_only())
    assert not any(name.startswith("MS_") for name in pod.env)
    assert (pod.env["RANK_TABLE_FILE"], pod.env["XDL_IP"]) == ("/rt/hccl.json", "198.18.0.1")
    table = json.loads(pod.files["/rt/hccl.json"])
    assert (table["status"], table["version"], table["server_count"]) == ("completed", "1.0", "1")
    assert [s["host_ip"] for s in table["server_list"]] == ["198.18.0.1"]
    assert [d["rank_id"] for s in table["server_list"] for d in s["device"]] == ["0"]
    env = localize(pod, tmp_path)
    local = tmp_path / "job-worker-0" / "rt" / "hccl.json"
    assert env["RANK_TABLE_FILE"] == str(local)
    assert json.loads(local.read_text()) == table


def test_plain_addresses_for_simulate() -> None:
    net = Network(dns=False, pod_ip=loopback, node_ip=loopback, service_ip=loopback(0))
    request = RenderRequest(
        target="volcano", framework="torch_ddp", nodes=2, image="i", command=("x",), name="job"
    )
    pods = inject(render(request), net)
    assert pods[1].env["VC_WORKER_HOSTS"] == "127.0.0.2"
    assert pods[1].env["MASTER_ADDR"] == "127.0.0.1"
    assert pods[1].env["HOSTNAME"] == "job-worker-0"  # the pod name, as Kubernetes sets it
