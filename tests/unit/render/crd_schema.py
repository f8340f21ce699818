"""The operators' CRD fields as the tests hold rendered manifests to them, written from the
CRDs and their controllers' validation (conventions §6, §7), independently of the renderer's
own models: strict types, no unknown field, the enums the operators accept, and the checks
their admission webhooks make (Volcano: one of event / exitCode per policy, exit code not 0,
no duplicates; Kubeflow: one Master, the framework's container name; MindX: the ``ascend``
container and ``checkReplicaSpecs``' rules, below). Pod templates are checked by
kubernetes-validate instead.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Tuple, Type

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class Strict(BaseModel):
    """Field names are the CRDs' own (camelCase), so a document validates as it is."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Metadata(Strict):
    name: str
    namespace: Optional[str] = None
    labels: Optional[Dict[str, str]] = None

    @field_validator("name")
    @classmethod
    def _dns_label(cls, name: str) -> str:
        if len(name) > 63 or not DNS_LABEL.fullmatch(name):
            msg = f"{name!r} is not a DNS-1123 label"
            raise ValueError(msg)
        return name


VolcanoEvent = Literal[
    "*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted",
    "TaskFailed", "OutOfSync", "CommandIssued", "JobUpdated",
]  # fmt: skip
VolcanoAction = Literal[
    "AbortJob", "RestartJob", "RestartTask", "RestartPod", "TerminateJob", "CompleteJob",
    "ResumeJob", "SyncJob", "EnqueueJob",
]  # fmt: skip


class VolcanoPolicy(Strict):
    event: Optional[VolcanoEvent] = None
    exitCode: Optional[int] = Field(default=None, ge=1, le=255)
    action: VolcanoAction

    @model_validator(mode="after")
    def _one_trigger(self) -> VolcanoPolicy:
        if (self.event is None) == (self.exitCode is None):
            msg = "a policy needs exactly one of event and exitCode"
            raise ValueError(msg)
        return self


def _no_duplicates(policies: Optional[List[VolcanoPolicy]]) -> None:
    triggers = [(p.event, p.exitCode) for p in policies or []]
    if len(set(triggers)) != len(triggers):
        msg = f"duplicate policy triggers: {triggers}"
        raise ValueError(msg)


class VolcanoTask(Strict):
    name: str
    replicas: int = Field(ge=1)
    template: Dict[str, Any]
    policies: Optional[List[VolcanoPolicy]] = None
    minAvailable: Optional[int] = None


VolcanoPlugin = Literal["env", "svc", "ssh", "pytorch", "tensorflow", "mpi", "hcclrank"]


class VolcanoSpec(Strict):
    schedulerName: str
    minAvailable: int = Field(ge=1)
    maxRetry: int = Field(ge=1)  # Volcano turns 0 into 3
    queue: Optional[str] = None
    plugins: Dict[VolcanoPlugin, List[str]]
    policies: List[VolcanoPolicy]
    tasks: List[VolcanoTask] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> VolcanoSpec:
        _no_duplicates(self.policies)
        for task in self.tasks:
            _no_duplicates(task.policies)
        names = [task.name for task in self.tasks]
        if len(set(names)) != len(names):
            msg = f"duplicate task names: {names}"
            raise ValueError(msg)
        if self.minAvailable > sum(task.replicas for task in self.tasks):
            msg = "minAvailable is more than the job's pods"
            raise ValueError(msg)
        return self


class VolcanoJob(Strict):
    apiVersion: Literal["batch.volcano.sh/v1alpha1"]
    kind: Literal["Job"]
    metadata: Metadata
    spec: VolcanoSpec


RestartPolicy = Literal["Always", "OnFailure", "Never", "ExitCode"]


class ReplicaSpec(Strict):
    replicas: int = Field(ge=1)
    restartPolicy: RestartPolicy
    template: Dict[str, Any]

    def container_names(self) -> List[str]:
        return [c["name"] for c in self.template["spec"]["containers"]]


class RunPolicy(Strict):
    cleanPodPolicy: Optional[Literal["All", "Running", "None"]] = None
    backoffLimit: Optional[int] = None


def _needs_container(specs: Iterable[Tuple[str, ReplicaSpec]], name: str) -> None:
    for replica, spec in specs:
        if name not in spec.container_names():
            msg = f"{replica}: no container named {name}"
            raise ValueError(msg)


class PyTorchSpec(Strict):
    runPolicy: RunPolicy
    nprocPerNode: Optional[str] = None
    pytorchReplicaSpecs: Dict[Literal["Master", "Worker"], ReplicaSpec]

    @model_validator(mode="after")
    def _operator_rules(self) -> PyTorchSpec:
        master = self.pytorchReplicaSpecs.get("Master")
        if master is not None and master.replicas != 1:
            msg = "there must be only 1 master replica"
            raise ValueError(msg)
        _needs_container(self.pytorchReplicaSpecs.items(), "pytorch")
        return self


class PyTorchJob(Strict):
    apiVersion: Literal["kubeflow.org/v1"]
    kind: Literal["PyTorchJob"]
    metadata: Metadata
    spec: PyTorchSpec


class TFSpec(Strict):
    runPolicy: RunPolicy
    successPolicy: Optional[Literal["", "AllWorkers"]] = None
    tfReplicaSpecs: Dict[Literal["Chief", "Master", "PS", "Worker", "Evaluator"], ReplicaSpec]

    @model_validator(mode="after")
    def _operator_rules(self) -> TFSpec:
        for leader in ("Chief", "Master"):  # tfjob_webhook: "There must be only 1 chief replica"
            spec = self.tfReplicaSpecs.get(leader)
            if spec is not None and spec.replicas != 1:
                msg = f"there must be only 1 {leader.lower()} replica"
                raise ValueError(msg)
        _needs_container(self.tfReplicaSpecs.items(), "tensorflow")
        return self


class TFJob(Strict):
    apiVersion: Literal["kubeflow.org/v1"]
    kind: Literal["TFJob"]
    metadata: Metadata
    spec: TFSpec


class SchedulingPolicy(Strict):
    minAvailable: int = Field(ge=1)
    queue: str


class AscendRunPolicy(Strict):
    schedulingPolicy: SchedulingPolicy


class AscendSpec(Strict):
    schedulerName: str
    runPolicy: AscendRunPolicy
    successPolicy: Literal["", "AllWorkers"]
    replicaSpecs: Dict[Literal["Master", "Scheduler", "Chief", "Worker"], ReplicaSpec]

    @model_validator(mode="after")
    def _operator_rules(self) -> AscendSpec:
        _needs_container(self.replicaSpecs.items(), "ascend")
        return self


# MindX ascend-operator, component/ascend-operator/pkg/controllers/v1/ascendjob_validate.go
# (Ascend/mind-cluster 36f7c088): the replica types each framework label allows, its leader first.
ASCEND_REPLICAS = {
    "mindspore": ("Scheduler", "Worker"),
    "pytorch": ("Master", "Worker"),
    "tensorflow": ("Chief", "Worker"),
}
ASCEND_NPU = "huawei.com/Ascend"  # the controller's npuPrefix, matched anywhere in the name


def ascend_npus(spec: ReplicaSpec) -> int:
    """NPUs the ``ascend`` container requests (``getContainerResourceReq``)."""
    for container in spec.template["spec"]["containers"]:
        if container["name"] == "ascend":
            requests = (container.get("resources") or {}).get("requests") or {}
            return next((int(v) for k, v in requests.items() if ASCEND_NPU in k), 0)
    return 0


def ascend_replica_rules(framework: str, specs: Mapping[str, ReplicaSpec]) -> None:
    """``checkReplicaSpecs``: the types the framework allows, a leader (a non-Worker type) of
    exactly 1 replica, NPUs on every replica but the Scheduler, and a leader for every job but
    a MindSpore one whose workers request at most 1 NPU in all; the messages are the
    operator's own."""
    allowed = ASCEND_REPLICAS[framework]
    for replica, spec in specs.items():
        if replica not in allowed:
            msg = f"replicaType is {replica} but must be one of [{' '.join(allowed)}]"
            raise ValueError(msg)
        if replica != "Worker" and spec.replicas != 1:
            msg = f"replicaType<{replica}> replicas is invalid, it must be only 1"
            raise ValueError(msg)
        if replica != "Scheduler" and ascend_npus(spec) == 0:
            msg = f"replicaType<{replica}> req npu<0> is invalid, it can not be 0"
            raise ValueError(msg)
    if any(replica != "Worker" for replica in specs):
        return
    if framework != "mindspore":
        raise ValueError("ReplicaType is not valid: there need 1 leader replica-type")
    worker = specs["Worker"]
    if ascend_npus(worker) * worker.replicas > 1:
        # sic: the operator's message spells it so
        msg = "replicaType is not valid: schdeuler not found, but need 1 while req npu more than 1"
        raise ValueError(msg)


class AscendJob(Strict):
    apiVersion: Literal["mindxdl.gitee.com/v1"]
    kind: Literal["AscendJob"]
    metadata: Metadata
    spec: AscendSpec

    @model_validator(mode="after")
    def _framework_label(self) -> AscendJob:
        framework = (self.metadata.labels or {}).get("framework")
        if framework not in ASCEND_REPLICAS:
            msg = f"label framework {framework!r}: expected mindspore, pytorch or tensorflow"
            raise ValueError(msg)
        ascend_replica_rules(framework, {str(k): v for k, v in self.spec.replicaSpecs.items()})
        return self


SCHEMAS: Dict[Tuple[str, str], Type[Strict]] = {
    ("batch.volcano.sh/v1alpha1", "Job"): VolcanoJob,
    ("kubeflow.org/v1", "PyTorchJob"): PyTorchJob,
    ("kubeflow.org/v1", "TFJob"): TFJob,
    ("mindxdl.gitee.com/v1", "AscendJob"): AscendJob,
}
