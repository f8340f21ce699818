"""``malaunch render``'s manifests, checked offline: the YAML parses (PyYAML), every pod template
passes kubernetes-validate (strict, the newest Kubernetes it ships), every custom resource the
tests' own model of its CRD (crd_schema.py), and each target's particulars."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Dict, Iterator, List, Tuple

import kubernetes_validate  # type: ignore[import-untyped]  # ships no type information
import pytest
import yaml
from pydantic import ValidationError

from malaunch.errors import UsageError
from malaunch.render.manifests import load, render, to_yaml
from malaunch.render.request import RenderRequest, grace_seconds
from render.crd_schema import SCHEMAS

K8S_VERSION = kubernetes_validate.latest_version()
COMMAND = ("python", "train.py", "--lr", "0.1")

CASES: Dict[str, RenderRequest] = {
    "volcano-torch": RenderRequest(
        target="volcano", framework="torch_ddp", nodes=3, image="registry.example/train:1",
        command=COMMAND, launcher_args=("--framework", "torch_ddp", "--nproc-per-node", "4"),
        nproc_per_node=4, accelerator="nvidia.com/gpu", namespace="team-a", queue="research",
    ),
    "volcano-ps": RenderRequest(
        target="volcano", framework="tensorflow_ps", nodes=2, num_ps=2, image="img:1",
        command=COMMAND, launcher_args=("--framework", "tensorflow_ps"),
    ),
    "volcano-mindspore": RenderRequest(
        target="volcano", framework="mindspore", nodes=2, image="img:1", command=COMMAND,
        launcher_args=("--framework", "mindspore", "--nproc-per-node", "2"), nproc_per_node=2,
    ),
    "pytorchjob": RenderRequest(
        target="pytorchjob", framework="torch_ddp", nodes=3, image="img:1", command=COMMAND,
        launcher_args=("--framework", "torch_ddp", "--nproc-per-node", "8"), nproc_per_node=8,
        accelerator="nvidia.com/gpu", grace_period=60.0,
    ),
    "tfjob": RenderRequest(
        target="tfjob", framework="tensorflow_ps", nodes=3, num_ps=1, image="img:1",
        command=COMMAND, launcher_args=("--framework", "tensorflow_ps"),
    ),
    "ascendjob-pytorch": RenderRequest(
        target="ascendjob", framework="torch_ddp", nodes=2, image="img:1", command=COMMAND,
        launcher_args=("--framework", "torch_ddp", "--nproc-per-node", "8"), nproc_per_node=8,
    ),
    "ascendjob-mindspore": RenderRequest(
        target="ascendjob", framework="mindspore", nodes=4, image="img:1", command=COMMAND,
        launcher_args=("--framework", "mindspore"), nproc_per_node=8,
    ),
}  # fmt: skip


def documents(name: str) -> List[Dict[str, Any]]:
    text = to_yaml(render(CASES[name]))
    loaded = list(yaml.safe_load_all(text))
    assert all(isinstance(doc, dict) for doc in loaded)
    return loaded


def templates(doc: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(task or replica, pod template) of a custom resource."""
    spec = doc["spec"]
    for task in spec.get("tasks", []):
        yield task["name"], task["template"]
    for key in ("pytorchReplicaSpecs", "tfReplicaSpecs", "replicaSpecs"):
        for replica, replica_spec in spec.get(key, {}).items():
            yield replica, replica_spec["template"]


def containers(doc: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {task: t["spec"]["containers"][0] for task, t in templates(doc)}


def job(name: str) -> Dict[str, Any]:
    return documents(name)[-1]


@pytest.mark.parametrize("name", CASES)
def test_custom_resources_fit_their_crds(name: str) -> None:
    docs = documents(name)
    for doc in docs:
        key = (doc["apiVersion"], doc["kind"])
        if key == ("v1", "ConfigMap"):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        else:
            SCHEMAS[key].model_validate(doc)


@pytest.mark.parametrize("name", CASES)
def test_pod_templates_are_valid_kubernetes(name: str) -> None:
    for task, template in templates(job(name)):
        wrapped = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": f"check-{task.lower()}"},
            "template": template,
        }
        kubernetes_validate.validate(wrapped, K8S_VERSION, strict=True)


@pytest.mark.parametrize("name", CASES)
def test_every_container_starts_malaunch_with_the_command_untouched(name: str) -> None:
    request = CASES[name]
    for container in containers(job(name)).values():
        command = container["command"]
        assert command == ["malaunch", *request.launcher_args, "--", *COMMAND]
        assert container["image"] == request.image


@pytest.mark.parametrize("name", CASES)
def test_shm_and_grace_period(name: str) -> None:
    for _, template in templates(job(name)):
        spec = template["spec"]
        assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in spec["volumes"]
        mounts = spec["containers"][0]["volumeMounts"]
        assert {"name": "dshm", "mountPath": "/dev/shm"} in mounts
        assert spec["terminationGracePeriodSeconds"] >= CASES[name].grace_period + 15


def test_grace_seconds() -> None:
    assert [grace_seconds(g) for g in (0, 5, 15, 15.2, 60)] == [30, 30, 30, 31, 75]


@pytest.mark.parametrize("name", CASES)
def test_the_manifests_read_back_into_the_same_models(name: str) -> None:
    models = render(CASES[name])
    assert load(documents(name)) == models


# --- Volcano ----------------------------------------------------------------------------------


def test_volcano_torch_master_and_workers_with_the_pytorch_plugin() -> None:
    doc = job("volcano-torch")
    spec = doc["spec"]
    assert doc["metadata"] == {"name": "malaunch-torch-ddp", "namespace": "team-a"}
    assert [(t["name"], t["replicas"]) for t in spec["tasks"]] == [("master", 1), ("worker", 2)]
    assert spec["minAvailable"] == 3
    assert spec["queue"] == "research"
    assert spec["plugins"] == {
        "env": [], "svc": [], "pytorch": ["--master=master", "--worker=worker", "--port=23456"],
    }  # fmt: skip
    for container in containers(doc).values():
        assert container["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert all(t["template"]["spec"]["restartPolicy"] == "Never" for t in spec["tasks"])


OWN_CODES = [
    {"exitCode": 69, "action": "RestartJob"},
    {"exitCode": 64, "action": "TerminateJob"},
    {"exitCode": 65, "action": "TerminateJob"},
    {"exitCode": 66, "action": "TerminateJob"},
    {"exitCode": 78, "action": "TerminateJob"},
]


def test_volcano_policies_are_keyed_on_malaunch_exit_codes() -> None:
    replacing = dataclasses.replace(CASES["volcano-torch"], max_restarts=2)
    assert render(replacing)[0].to_dict()["spec"]["policies"] == [
        {"event": "PodEvicted", "action": "RestartPod"},  # a lost node: its pod alone
        {"exitCode": 137, "action": "RestartPod"},  # its launcher killed
        {"exitCode": 143, "action": "RestartPod"},  # its launcher stopped
        *OWN_CODES,
    ]


@pytest.mark.parametrize(
    "changes",
    [{}, {"max_restarts": 2, "rejoin_timeout": 0.0}, {"max_restarts": 2, "job_channel": False}],
    ids=["no-restarts", "no-wait", "no-channel"],
)
def test_volcano_restarts_the_job_on_eviction_where_nobody_awaits_a_pod(
    changes: Dict[str, Any],
) -> None:
    """Where the launchers do not wait for a lost pod's replacement, one lost pod ends the
    attempt everywhere: a pod recreated alone would wait --wait-timeout for nobody."""
    request = dataclasses.replace(CASES["volcano-torch"], **changes)
    assert render(request)[0].to_dict()["spec"]["policies"] == [
        {"event": "PodEvicted", "action": "RestartJob"},
        *OWN_CODES,
    ]


@pytest.mark.parametrize(("restarts", "max_retry"), [(0, 1), (2, 3), (5, 6)])
def test_volcano_max_retry_is_never_zero(restarts: int, max_retry: int) -> None:
    request = dataclasses.replace(CASES["volcano-torch"], platform_restarts=restarts)
    spec = render(request)[0].to_dict()["spec"]
    assert spec["maxRetry"] == max_retry


def test_volcano_ps_job_completes_with_its_workers() -> None:
    spec = job("volcano-ps")["spec"]
    assert [(t["name"], t["replicas"]) for t in spec["tasks"]] == [("ps", 2), ("worker", 2)]
    assert "policies" not in spec["tasks"][0]
    assert spec["tasks"][1]["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]
    assert spec["plugins"]["tensorflow"] == ["--ps=ps", "--worker=worker", "--port=2222"]
    assert "pytorch" not in spec["plugins"]
    assert spec["minAvailable"] == 4


def test_volcano_other_frameworks_get_one_worker_task() -> None:
    spec = job("volcano-mindspore")["spec"]
    assert [(t["name"], t["replicas"]) for t in spec["tasks"]] == [("worker", 2)]
    assert spec["plugins"] == {"env": [], "svc": []}


def test_volcano_single_node_torch_job_has_only_its_master() -> None:
    request = dataclasses.replace(CASES["volcano-torch"], nodes=1)
    tasks = render(request)[0].to_dict()["spec"]["tasks"]
    assert [(t["name"], t["replicas"]) for t in tasks] == [("master", 1)]


# --- Kubeflow ---------------------------------------------------------------------------------


def test_pytorchjob() -> None:
    doc = job("pytorchjob")
    spec = doc["spec"]
    assert spec["nprocPerNode"] == "8"
    assert {k: v["replicas"] for k, v in spec["pytorchReplicaSpecs"].items()} == {
        "Master": 1, "Worker": 2,
    }  # fmt: skip
    for container in containers(doc).values():
        assert container["name"] == "pytorch"
        assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
    # nobody waits for a pod recreated alone: pods never restart by themselves
    assert {r["restartPolicy"] for r in spec["pytorchReplicaSpecs"].values()} == {"Never"}
    # with restarts, a pod whose launcher was killed (137) or stopped (143) is recreated alone
    # and rejoins
    replacing = dataclasses.replace(CASES["pytorchjob"], max_restarts=1)
    replicas = render(replacing)[0].to_dict()["spec"]["pytorchReplicaSpecs"]
    assert {r["restartPolicy"] for r in replicas.values()} == {"ExitCode"}
    template = spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert template["terminationGracePeriodSeconds"] == 75
    assert "restartPolicy" not in template  # the replica's wins; the operator warns otherwise


def test_tfjob() -> None:
    doc = job("tfjob")
    spec = doc["spec"]
    assert {k: v["replicas"] for k, v in spec["tfReplicaSpecs"].items()} == {"PS": 1, "Worker": 3}
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running"}
    ports = [c["ports"] for c in containers(doc).values()]
    assert ports == [[{"name": "tfjob-port", "containerPort": 2222}]] * 2
    assert [c["name"] for c in containers(doc).values()] == ["tensorflow", "tensorflow"]


# --- MindX ------------------------------------------------------------------------------------


def test_ascendjob_pytorch() -> None:
    docs = documents("ascendjob-pytorch")
    assert [d["kind"] for d in docs] == ["AscendJob"]
    doc = docs[0]
    assert doc["metadata"]["labels"] == {
        "framework": "pytorch", "ring-controller.atlas": "ascend-910b",
    }  # fmt: skip
    replacing = dataclasses.replace(CASES["ascendjob-pytorch"], max_restarts=1)
    assert render(replacing)[0].to_dict()["metadata"]["labels"] == {
        "framework": "pytorch", "ring-controller.atlas": "ascend-910b",
        "fault-scheduling": "force", "pod-rescheduling": "on",  # a lost pod comes back alone
    }  # fmt: skip
    spec = doc["spec"]
    assert spec["runPolicy"] == {"schedulingPolicy": {"minAvailable": 2, "queue": "default"}}
    assert spec["successPolicy"] == "AllWorkers"
    assert {k: v["replicas"] for k, v in spec["replicaSpecs"].items()} == {"Master": 1, "Worker": 1}
    for container in containers(doc).values():
        assert container["name"] == "ascend"
        assert container["resources"]["requests"] == {"huawei.com/Ascend910": "8"}
        # The master Service forwards only declared ports: the job channel's is one of them.
        assert container["ports"] == [
            {"name": "ascendjob-port", "containerPort": 2222},
            {"name": "malaunch-job", "containerPort": 2223},
        ]
        assert "env" not in container


def test_ascendjob_mindspore_has_a_scheduler_and_its_workers() -> None:
    docs = documents("ascendjob-mindspore")
    assert [d["kind"] for d in docs] == ["AscendJob"]  # no rank-table ConfigMap
    doc = docs[0]
    assert doc["metadata"]["labels"] == {
        "framework": "mindspore", "ring-controller.atlas": "ascend-910b",
    }  # fmt: skip
    spec = doc["spec"]
    replicas = {k: v["replicas"] for k, v in spec["replicaSpecs"].items()}
    assert replicas == {"Scheduler": 1, "Worker": 4}
    assert spec["runPolicy"]["schedulingPolicy"]["minAvailable"] == 5  # the scheduler too
    scheduler, worker = (spec["replicaSpecs"][k]["template"] for k in ("Scheduler", "Worker"))
    # Every template carries the job's NPU model, the Scheduler's too (no NPU of its own), as
    # in MindCluster's mindspore_multinodes_acjob_910b.yaml sample.
    for template in (scheduler, worker):
        assert template["metadata"] == {"labels": {"ring-controller.atlas": "ascend-910b"}}
    for template in (scheduler, worker):
        container = template["spec"]["containers"][0]
        assert container["name"] == "ascend"
        assert container["ports"] == [{"name": "ascendjob-port", "containerPort": 2222}]
        assert "env" not in container  # the operator's MS_* variables, no RANK_TABLE_FILE
        assert [v["name"] for v in template["spec"]["volumes"]] == ["dshm"]
    assert "resources" not in scheduler["spec"]["containers"][0]
    npus = {"huawei.com/Ascend910": "8"}
    assert worker["spec"]["containers"][0]["resources"] == {"requests": npus, "limits": npus}


def without_scheduler(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The AscendJob as render wrote it before it had a Scheduler: Worker replicas only."""
    old = copy.deepcopy(doc)
    del old["spec"]["replicaSpecs"]["Scheduler"]
    return old


def test_the_operator_refuses_mindspore_workers_without_a_scheduler() -> None:
    doc = job("ascendjob-mindspore")
    SCHEMAS[("mindxdl.gitee.com/v1", "AscendJob")].model_validate(doc)
    with pytest.raises(ValidationError) as info:
        SCHEMAS[("mindxdl.gitee.com/v1", "AscendJob")].model_validate(without_scheduler(doc))
    assert (
        "replicaType is not valid: schdeuler not found, but need 1 while req npu more than 1"
        in str(info.value)
    )


def test_the_operator_takes_one_npu_of_mindspore_workers_without_a_scheduler() -> None:
    request = dataclasses.replace(CASES["ascendjob-mindspore"], nodes=1, nproc_per_node=1)
    doc = without_scheduler(render(request)[-1].to_dict())
    SCHEMAS[("mindxdl.gitee.com/v1", "AscendJob")].model_validate(doc)  # rank-table mode
    doc["spec"]["replicaSpecs"]["Worker"]["replicas"] = 2
    with pytest.raises(ValidationError, match="schdeuler not found"):
        SCHEMAS[("mindxdl.gitee.com/v1", "AscendJob")].model_validate(doc)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda specs: specs.pop("Master"),
            "ReplicaType is not valid: there need 1 leader replica-type",
        ),
        (
            lambda specs: specs["Master"].update(replicas=2),
            "replicaType<Master> replicas is invalid, it must be only 1",
        ),
        (
            lambda specs: specs.update(Scheduler=specs["Master"]),
            "replicaType is Scheduler but must be one of [Master Worker]",
        ),
        (
            lambda specs: specs["Worker"]["template"]["spec"]["containers"][0].pop("resources"),
            "replicaType<Worker> req npu<0> is invalid, it can not be 0",
        ),
    ],
)
def test_the_operator_rules_for_other_frameworks(
    change: Callable[[Dict[str, Any]], object], message: str
) -> None:
    doc = job("ascendjob-pytorch")
    change(doc["spec"]["replicaSpecs"])
    with pytest.raises(ValidationError) as info:
        SCHEMAS[("mindxdl.gitee.com/v1", "AscendJob")].model_validate(doc)
    assert message in str(info.value)


# --- refusals -----------------------------------------------------------------------------------

REFUSED = [
    (
        {"target": "tfjob"},
        "render tfjob: framework 'torch_ddp' does not run TensorFlow parameter servers: use "
        "--framework tensorflow_ps, or render volcano / pytorchjob",
    ),
    (
        {"target": "pytorchjob", "framework": "tensorflow_ps"},
        "render pytorchjob: tensorflow_ps needs parameter servers: use render tfjob or volcano",
    ),
    (
        {"target": "ascendjob", "framework": "echo"},
        "render ascendjob: framework 'echo' has no AscendJob form: expected torch_ddp, mindspore",
    ),
    (
        {"name": "My_Job"},
        "--name 'My_Job': expected a DNS-1035 label of at most 45 characters (a lower-case "
        "letter, then lower-case letters, digits and '-', not ending in '-'), as the operators "
        "require, and so that <name>-<task>-<index> pod names stay valid",
    ),
    (
        {"chief": True},
        "--chief: only TensorFlow parameter-server jobs (--framework tensorflow_ps) have a "
        "chief task, not torch_ddp",
    ),
    (
        {"framework": "tensorflow_ps", "success_policy": "chief"},
        "--success-policy chief: the rendered job has no chief task; add --chief",
    ),
    (
        {"node_selector": (("host arch", "arm"),)},
        "--node-selector 'host arch=arm': expected a Kubernetes label KEY=VALUE (KEY an optional "
        "DNS prefix and '/', then a name; VALUE at most 63 letters, digits, '-', '_' and '.')",
    ),
    (
        {"target": "ascendjob", "accelerator": "nvidia.com/gpu"},
        "--accelerator nvidia.com/gpu: the ascend-operator counts only Ascend NPUs "
        "(huawei.com/Ascend..., such as huawei.com/Ascend910) and refuses a replica that "
        "requests none",
    ),
    (
        {"target": "ascendjob", "accelerator_type": "ascend-999"},
        "--accelerator-type 'ascend-999': expected one of ascend-910b, ascend-910, ascend-npu, "
        "ascend-310P, ascend-310",
    ),
    ({"image": "a b"}, "--image 'a b': expected an image reference without spaces"),
    (
        {"command": ()},
        "render: no command given: malaunch render TARGET ... --framework NAME -- COMMAND",
    ),
    (
        {"target": "k8s"},
        "render: unknown target 'k8s': expected one of volcano, pytorchjob, ascendjob, tfjob",
    ),
]


@pytest.mark.parametrize(("changes", "message"), REFUSED)
def test_refusals_name_the_option(changes: Dict[str, Any], message: str) -> None:
    request = dataclasses.replace(CASES["volcano-torch"], **changes)
    with pytest.raises(UsageError) as info:
        render(request)
    assert str(info.value) == message
