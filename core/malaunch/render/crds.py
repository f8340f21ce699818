"""The operators' custom resources a rendered job is made of, as frozen models.

Only the fields malaunch writes, spelled as each CRD spells them (``K8sModel`` turns the Python
names into camelCase): Volcano's ``batch.volcano.sh/v1alpha1`` Job, Kubeflow's
``kubeflow.org/v1`` PyTorchJob and TFJob, MindX's ``mindxdl.gitee.com/v1`` AscendJob.
"""

from __future__ import annotations

from typing import Dict, Literal, Optional, Tuple, Union

from malaunch.render.k8s import ConfigMap, K8sModel, ObjectMeta, PodTemplateSpec

# --- Volcano ----------------------------------------------------------------------------------


class VolcanoPolicy(K8sModel):
    """What Volcano does on a pod event or a container exit code (never both)."""

    event: Optional[str] = None
    exit_code: Optional[int] = None
    action: str


class VolcanoTask(K8sModel):
    name: str
    replicas: int
    template: PodTemplateSpec
    policies: Optional[Tuple[VolcanoPolicy, ...]] = None


class VolcanoJobSpec(K8sModel):
    scheduler_name: str = "volcano"
    min_available: int
    max_retry: int
    queue: Optional[str] = None
    plugins: Dict[str, Tuple[str, ...]]
    policies: Tuple[VolcanoPolicy, ...]
    tasks: Tuple[VolcanoTask, ...]


class VolcanoJob(K8sModel):
    api_version: Literal["batch.volcano.sh/v1alpha1"] = "batch.volcano.sh/v1alpha1"
    kind: Literal["Job"] = "Job"
    metadata: ObjectMeta
    spec: VolcanoJobSpec


# --- Kubeflow training-operator v1 and MindX ascend-operator (kubeflow/common replica specs) ---


class ReplicaSpec(K8sModel):
    replicas: int
    restart_policy: str
    template: PodTemplateSpec


class RunPolicy(K8sModel):
    clean_pod_policy: Optional[str] = None
    backoff_limit: Optional[int] = None


class PyTorchJobSpec(K8sModel):
    run_policy: RunPolicy
    nproc_per_node: Optional[str] = None
    pytorch_replica_specs: Dict[str, ReplicaSpec]


class PyTorchJob(K8sModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["PyTorchJob"] = "PyTorchJob"
    metadata: ObjectMeta
    spec: PyTorchJobSpec


class TFJobSpec(K8sModel):
    run_policy: RunPolicy
    success_policy: Optional[str] = None
    tf_replica_specs: Dict[str, ReplicaSpec]


class TFJob(K8sModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["TFJob"] = "TFJob"
    metadata: ObjectMeta
    spec: TFJobSpec


class SchedulingPolicy(K8sModel):
    min_available: int
    queue: str


class AscendRunPolicy(K8sModel):
    scheduling_policy: SchedulingPolicy


class AscendJobSpec(K8sModel):
    scheduler_name: str = "volcano"
    run_policy: AscendRunPolicy
    success_policy: str = "AllWorkers"
    replica_specs: Dict[str, ReplicaSpec]


class AscendJob(K8sModel):
    api_version: Literal["mindxdl.gitee.com/v1"] = "mindxdl.gitee.com/v1"
    kind: Literal["AscendJob"] = "AscendJob"
    metadata: ObjectMeta
    spec: AscendJobSpec


Manifest = Union[VolcanoJob, PyTorchJob, TFJob, AscendJob, ConfigMap]
