"""Every manifest ``malaunch render`` writes, validated strictly against the operators' own
published CRDs (tests/fixtures/crds/, upstream_crds.py: an unknown field is an error), and what
issue 19 asked of them: a chief where the job has one, the Ascend model's label on every pod,
node selectors, and job names the operators accept."""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, Dict, List

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.errors import UsageError
from malaunch.render.ascend import ACCELERATOR_TYPES
from malaunch.render.manifests import render, to_yaml
from malaunch.render.request import RenderRequest
from render.crd_schema import SCHEMAS
from render.upstream_crds import errors

COMMAND = ("python", "train.py")
TARGET_FRAMEWORKS = [
    ("volcano", "torch_ddp"),
    ("volcano", "tensorflow_ps"),
    ("volcano", "mindspore"),
    ("pytorchjob", "torch_ddp"),
    ("tfjob", "tensorflow_ps"),
    ("ascendjob", "torch_ddp"),
    ("ascendjob", "mindspore"),
]
VARIANTS: List[Dict[str, Any]] = [
    {"nodes": 1},
    {"nodes": 3, "nproc_per_node": 8, "accelerator": "nvidia.com/gpu", "namespace": "team-a"},
    {"nodes": 2, "queue": "research", "grace_period": 120.0, "master_port": 30000},
    {"nodes": 2, "node_selector": (("host-arch", "huawei-arm"), ("accelerator-type", "module"))},
    {"nodes": 2, "job_port": 31000, "job_channel": False, "platform_restarts": 0},
    {"nodes": 3, "max_restarts": 2},  # lost pods replaced: RestartPod, ExitCode, MindCluster's
]


def request(target: str, framework: str, **changes: Any) -> RenderRequest:
    base = RenderRequest(target=target, framework=framework, nodes=2, image="img:1",
                         command=COMMAND, launcher_args=("--framework", framework))  # fmt: skip
    return dataclasses.replace(base, **changes)


def rendered(req: RenderRequest) -> List[Dict[str, Any]]:
    """The YAML render prints, read back."""
    return list(yaml.safe_load_all(to_yaml(render(req))))


def all_requests() -> List[RenderRequest]:
    cases = []
    for (target, framework), variant in itertools.product(TARGET_FRAMEWORKS, VARIANTS):
        changes = dict(variant)
        if target == "ascendjob" and "accelerator" in changes:
            changes["accelerator"] = "huawei.com/Ascend910"  # the operator counts NPUs only
        cases.append(request(target, framework, **changes))
    ps = [("volcano", "tensorflow_ps"), ("tfjob", "tensorflow_ps")]
    for (target, framework), policy in itertools.product(ps, (None, "chief", "all-workers")):
        cases.append(request(target, framework, chief=True, success_policy=policy, num_ps=2))
    for kind in ACCELERATOR_TYPES:
        for framework in ("torch_ddp", "mindspore"):
            cases.append(request("ascendjob", framework, accelerator_type=kind))
    return cases


@pytest.mark.parametrize("req", all_requests(), ids=lambda r: f"{r.target}-{r.framework}")
def test_every_rendered_target_fits_its_upstream_crd(req: RenderRequest) -> None:
    for document in rendered(req):
        if document["kind"] == "ConfigMap":
            continue  # core Kubernetes: kubernetes-validate checks it in test_manifests
        assert errors(document) == []
        SCHEMAS[document["apiVersion"], document["kind"]].model_validate(document)


@pytest.mark.parametrize(
    ("target", "framework", "where"),
    [
        ("volcano", "torch_ddp", ("spec", "tasks", 0)),
        ("pytorchjob", "torch_ddp", ("spec", "pytorchReplicaSpecs", "Master")),
        ("tfjob", "tensorflow_ps", ("spec", "tfReplicaSpecs", "PS")),
        ("ascendjob", "mindspore", ("spec", "replicaSpecs", "Scheduler")),
    ],
)
def test_the_check_is_strict(target: str, framework: str, where: Any) -> None:
    """A field the CRD does not name is an error (the API server would drop it silently)."""
    document = rendered(request(target, framework))[-1]
    node = document
    for key in where:
        node = node[key]
    node["restartPolicyy"] = "Never"
    assert [message for _, message in errors(document)] == [
        "Additional properties are not allowed ('restartPolicyy' was unexpected)"
    ]
    node.pop("restartPolicyy")
    document["spec"]["runPolicy" if target != "volcano" else "queue"] = 7
    assert errors(document) != []


def test_tfjob_with_a_chief() -> None:
    (job,) = rendered(request("tfjob", "tensorflow_ps", chief=True, nproc_per_node=2,
                              accelerator="nvidia.com/gpu"))  # fmt: skip
    replicas = job["spec"]["tfReplicaSpecs"]
    assert list(replicas) == ["Chief", "PS", "Worker"]
    assert replicas["Chief"]["replicas"] == 1
    chief = replicas["Chief"]["template"]["spec"]["containers"][0]
    assert chief["name"] == "tensorflow"
    assert chief["resources"]["requests"] == {"nvidia.com/gpu": "2"}  # the chief trains too
    assert "successPolicy" not in job["spec"]  # the operator's default: the chief's success
    (all_workers,) = rendered(
        request("tfjob", "tensorflow_ps", chief=True, success_policy="all-workers")
    )
    assert all_workers["spec"]["successPolicy"] == "AllWorkers"


def test_volcano_with_a_chief_completes_with_it() -> None:
    (job,) = rendered(request("volcano", "tensorflow_ps", chief=True))
    tasks = {task["name"]: task for task in job["spec"]["tasks"]}
    assert list(tasks) == ["chief", "ps", "worker"]
    assert tasks["chief"]["replicas"] == 1
    assert job["spec"]["plugins"]["tensorflow"] == [
        "--chief=chief", "--ps=ps", "--worker=worker", "--port=2222",
    ]  # fmt: skip
    completes = {"event": "TaskCompleted", "action": "CompleteJob"}
    assert tasks["chief"]["policies"] == [completes]
    assert "policies" not in tasks["worker"] and "policies" not in tasks["ps"]
    assert job["spec"]["minAvailable"] == 4
    (all_workers,) = rendered(
        request("volcano", "tensorflow_ps", chief=True, success_policy="all-workers")
    )
    tasks = {task["name"]: task for task in all_workers["spec"]["tasks"]}
    assert tasks["worker"]["policies"] == [completes] and "policies" not in tasks["chief"]


@pytest.mark.parametrize("kind", ACCELERATOR_TYPES)
@pytest.mark.parametrize("framework", ["torch_ddp", "mindspore"])
def test_ascendjob_labels_every_pod_with_the_accelerator_type(framework: str, kind: str) -> None:
    (job,) = rendered(request("ascendjob", framework, accelerator_type=kind))
    assert job["metadata"]["labels"]["ring-controller.atlas"] == kind
    for replica in job["spec"]["replicaSpecs"].values():  # the Scheduler's too
        assert replica["template"]["metadata"]["labels"] == {"ring-controller.atlas": kind}


def test_node_selector_on_every_pod() -> None:
    selector = (("host-arch", "huawei-arm"), ("example.com/pool", ""))
    for target, framework in TARGET_FRAMEWORKS:
        for document in rendered(request(target, framework, node_selector=selector)):
            for template in _templates(document):
                assert template["spec"]["nodeSelector"] == dict(selector)


def _templates(document: Dict[str, Any]) -> List[Dict[str, Any]]:
    spec = document["spec"]
    found = [task["template"] for task in spec.get("tasks", [])]
    for key in ("pytorchReplicaSpecs", "tfReplicaSpecs", "replicaSpecs"):
        found += [replica["template"] for replica in spec.get(key, {}).values()]
    return found


DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


@settings(max_examples=300, derandomize=True)
@given(st.text(alphabet="abz09-_.A\n ", min_size=0, max_size=50))
def test_job_names_are_dns_1035_labels(name: str) -> None:
    """Accepted exactly when the training operator's webhook (DNS-1035) would, within the
    45 characters that keep <name>-<task>-<index> pod names labels."""
    req = request("tfjob", "tensorflow_ps", name=name or None)
    expected_ok = (not name) or (len(name) <= 45 and DNS_1035.fullmatch(name) is not None)
    try:
        render(req)
    except UsageError as refused:
        assert not expected_ok
        message = str(refused)
        assert message.startswith(f"--name {name!r}: expected a DNS-1035 label")
        assert "\n" not in message
    else:
        assert expected_ok


def test_a_name_starting_with_a_digit_is_refused() -> None:
    with pytest.raises(UsageError, match=r"^--name '1bert': expected a DNS-1035 label"):
        render(request("pytorchjob", "torch_ddp", name="1bert"))
