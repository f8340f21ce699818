"""A MindX AscendJob (``mindxdl.gitee.com/v1``) whose pods start malaunch.

Every pod runs the container ``ascend`` (the operator looks for that name), requests
``--nproc-per-node`` NPUs (``--accelerator``, default ``huawei.com/Ascend910``) and exposes
``ascendjob-port``; the job is gang-scheduled by Volcano and succeeds when all workers have.

- ``torch_ddp`` (label ``framework: pytorch``): a ``Master`` replica and ``Worker`` replicas;
  the operator injects ``MASTER_ADDR`` (the master Service), ``RANK`` (the pod), ``WORLD_SIZE``,
  ``LOCAL_WORLD_SIZE``, read by the ``mindx-pytorch`` source.
- ``mindspore`` (label ``framework: mindspore``): ``Worker`` replicas only, which the operator
  leaves without variables and gives an HCCL rank table instead, through the ConfigMap
  ``rings-config-<job>`` (``hccl.json``, ``{"status": "initializing"}`` until it is filled)
  mounted at ``/user/serverid/devindex/config``; ``RANK_TABLE_FILE`` points there (``ranktable``
  source, which waits until it is ``completed``) and ``XDL_IP`` (the node's IP) tells which
  server of the table this pod is.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Dict, List, Sequence, Tuple

from malaunch.errors import UsageError
from malaunch.render.crds import (
    AscendJob,
    AscendJobSpec,
    AscendRunPolicy,
    ReplicaSpec,
    SchedulingPolicy,
)
from malaunch.render.k8s import (
    ConfigMap,
    ConfigMapVolumeSource,
    ContainerPort,
    EnvVar,
    K8sModel,
    ObjectMeta,
    Volume,
    VolumeMount,
    env_from_field,
)
from malaunch.render.request import PodParts, RenderRequest, metadata, pod_template, split

ASCEND_PORT = 2222  # the operator's default ascendjob-port
NPU = "huawei.com/Ascend910"
RING_LABEL = {"ring-controller.atlas": "ascend-910b"}
RANK_TABLE_DIR = "/user/serverid/devindex/config"
RANK_TABLE_VOLUME = "ascend-910-config"
FRAMEWORKS = {"torch_ddp": "pytorch", "mindspore": "mindspore"}


def job_framework(framework: str) -> str:
    """The AscendJob ``framework`` label for a malaunch framework."""
    if framework not in FRAMEWORKS:
        known = ", ".join(FRAMEWORKS)
        msg = f"render ascendjob: framework {framework!r} has no AscendJob form: expected {known}"
        raise UsageError(msg)
    return FRAMEWORKS[framework]


def _rank_table(request: RenderRequest) -> Tuple[ConfigMap, PodParts]:
    """The ConfigMap the operator fills with the rank table, and how pods mount it."""
    config = ConfigMap(
        metadata=ObjectMeta(
            name=f"rings-config-{request.job_name}", namespace=request.namespace, labels=RING_LABEL
        ),
        data={"hccl.json": json.dumps({"status": "initializing"})},
    )
    volume = Volume(
        name=RANK_TABLE_VOLUME, config_map=ConfigMapVolumeSource(name=config.metadata.name or "")
    )
    parts = PodParts(
        container="ascend",
        env=(
            EnvVar(name="RANK_TABLE_FILE", value=f"{RANK_TABLE_DIR}/hccl.json"),
            env_from_field("XDL_IP", "status.hostIP"),
        ),
        volumes=(volume,),
        mounts=(VolumeMount(name=RANK_TABLE_VOLUME, mount_path=RANK_TABLE_DIR),),
    )
    return config, parts


def render(request: RenderRequest) -> List[K8sModel]:
    """The AscendJob, and for MindSpore its rank-table ConfigMap first."""
    label = job_framework(request.framework)
    if request.accelerator is None:
        request = dataclasses.replace(request, accelerator=NPU)  # no NPU, no operator variables
    manifests: List[K8sModel] = []
    parts = PodParts(container="ascend")
    replicas: Sequence[Tuple[str, int]] = split(request.nodes)
    if label == "mindspore":
        config, parts = _rank_table(request)
        manifests.append(config)
        replicas = [("worker", request.nodes)]
    port = ContainerPort(name="ascendjob-port", container_port=request.master_port or ASCEND_PORT)
    pod = dataclasses.replace(parts, accelerators=request.nproc, port=port, labels=RING_LABEL)
    specs: Dict[str, ReplicaSpec] = {
        task.capitalize(): ReplicaSpec(
            replicas=pods, restart_policy="Never", template=pod_template(request, pod)
        )
        for task, pods in replicas
    }
    policy = SchedulingPolicy(min_available=request.nodes, queue=request.queue or "default")
    spec = AscendJobSpec(run_policy=AscendRunPolicy(scheduling_policy=policy), replica_specs=specs)
    labels = {"framework": label, **RING_LABEL}
    manifests.append(AscendJob(metadata=metadata(request, labels), spec=spec))
    return manifests
