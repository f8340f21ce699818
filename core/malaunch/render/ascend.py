"""A MindX AscendJob (``mindxdl.gitee.com/v1``) whose pods start malaunch.

Every pod runs the container ``ascend`` (the operator looks for that name) and exposes
``ascendjob-port``; every worker requests ``--nproc-per-node`` NPUs (``--accelerator``, default
``huawei.com/Ascend910``); the job is gang-scheduled by Volcano (``minAvailable`` = every pod)
and succeeds when all workers have. The job and every pod template, the Scheduler's included
(as in MindCluster's samples), carry ``ring-controller.atlas: <--accelerator-type>``, the NPU
model MindX's scheduler plugin matches (``ascend-910b`` by default).

- ``torch_ddp`` (label ``framework: pytorch``): a ``Master`` replica and ``Worker`` replicas;
  the operator injects ``MASTER_ADDR`` (the master Service), ``RANK`` (the pod), ``WORLD_SIZE``,
  ``LOCAL_WORLD_SIZE``, read by the ``mindx-pytorch`` source. The container also declares
  ``malaunch-job``, the job channel's port (``--job-port``, else master port + 1): the other
  pods dial the master through its Service, which forwards only the declared ports.
- ``mindspore`` (label ``framework: mindspore``): a ``Scheduler`` replica (one pod, no NPU) and
  ``--nodes`` ``Worker`` replicas. The operator injects ``MS_ROLE`` (``MS_SCHED`` /
  ``MS_WORKER``), ``MS_SCHED_HOST`` (the scheduler's pod IP on its own pod, its Service's IP on
  the workers), ``MS_SCHED_PORT``, ``MS_WORKER_NUM``, ``MS_LOCAL_WORKER`` and ``MS_NODE_RANK``,
  read by the ``mindx`` source: the scheduler pod's launcher starts the MindSpore scheduler,
  each worker pod's one worker per NPU.

A ``torch_ddp`` job of several pods whose launchers wait for a lost pod's replacement
(``--max-restarts``, the job channel on) carries MindCluster's pod-level rescheduling labels
(``fault-scheduling: force``, ``pod-rescheduling: "on"``): a pod lost to a node or NPU fault is
recreated alone and its launcher rejoins the job (SPEC §9 "Replacement").

The operator's admission rules (mind-cluster ``ascendjob_validate.go``, ``checkReplicaSpecs``):
each framework has one leader type (``Master`` / ``Scheduler`` / ``Chief``) of exactly 1
replica; every non-``Scheduler`` replica's ``ascend`` container requests NPUs; and only a
MindSpore job may have no leader, and then only while its workers request at most 1 NPU in all.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from malaunch.errors import UsageError
from malaunch.render.crds import (
    AscendJob,
    AscendJobSpec,
    AscendRunPolicy,
    ReplicaSpec,
    SchedulingPolicy,
)
from malaunch.render.k8s import ContainerPort, K8sModel
from malaunch.render.request import (
    PodParts,
    RenderRequest,
    metadata,
    pod_template,
    replaces_lost_pods,
    split,
)

ASCEND_PORT = 2222  # the operator's default ascendjob-port
MAX_PORT = 65535
NPU = "huawei.com/Ascend910"
NPU_PREFIX = "huawei.com/Ascend"  # what the operator's getContainerResourceReq looks for
RING_KEY = "ring-controller.atlas"
# The values of the label MindX knows (ascend-for-volcano's JobKind*Value, MindCluster's acjob
# field table): Atlas 800 training servers (910), Atlas A2/A3 training (910b), the inference
# cards (310, 310P), and Atlas 350/850/950 (npu).
ACCELERATOR_TYPES = ("ascend-910b", "ascend-910", "ascend-npu", "ascend-310P", "ascend-310")
FRAMEWORKS = {"torch_ddp": "pytorch", "mindspore": "mindspore"}
# MindCluster's pod-level rescheduling: a pod on a faulty node or NPU is recreated alone and
# rejoins its job (the others wait --rejoin-timeout); a fault of the pod with rank 0 is
# rescheduled job-level by MindCluster itself. Only where the job channel ties the pods.
RESCHEDULING = {"fault-scheduling": "force", "pod-rescheduling": "on"}


def job_framework(framework: str) -> str:
    """The AscendJob ``framework`` label for a malaunch framework."""
    if framework not in FRAMEWORKS:
        known = ", ".join(FRAMEWORKS)
        msg = f"render ascendjob: framework {framework!r} has no AscendJob form: expected {known}"
        raise UsageError(msg)
    return FRAMEWORKS[framework]


def ring_label(accelerator_type: str) -> Dict[str, str]:
    """The ``ring-controller.atlas`` label of the job and of every pod (the Scheduler's too)."""
    if accelerator_type not in ACCELERATOR_TYPES:
        known = ", ".join(ACCELERATOR_TYPES)
        msg = f"--accelerator-type {accelerator_type!r}: expected one of {known}"
        raise UsageError(msg)
    return {RING_KEY: accelerator_type}


def render(request: RenderRequest) -> List[K8sModel]:
    """The AscendJob: its replicas, each pod starting malaunch with the same command."""
    label = job_framework(request.framework)
    ring = ring_label(request.accelerator_type)
    if request.accelerator is None:
        request = dataclasses.replace(request, accelerator=NPU)  # no NPU, no operator variables
    elif NPU_PREFIX not in request.accelerator:
        msg = (
            f"--accelerator {request.accelerator}: the ascend-operator counts only Ascend NPUs "
            f"({NPU_PREFIX}..., such as {NPU}) and refuses a replica that requests none"
        )
        raise UsageError(msg)
    port = ContainerPort(name="ascendjob-port", container_port=request.master_port or ASCEND_PORT)
    worker = PodParts(container="ascend", accelerators=request.nproc, port=port, labels=ring)
    replicas: Sequence[Tuple[str, int, PodParts]]
    if label == "mindspore":
        # Always a Scheduler: the operator refuses a MindSpore job without one once its workers
        # request more than 1 NPU in all, and with one it injects the MS_* variables into every
        # pod (the scheduler's included), so one layout serves every size. No rank table is
        # mounted: with RANK_TABLE_FILE set the `ranktable` source comes first in auto order
        # and `mindx` steps aside, so the workers would plan rank-table mode while the
        # scheduler pod (no NPU, in no table) waited for dynamic-cluster workers that never
        # register. The scheduler pod asks for no NPU (the operator allows 0 only there) and
        # keeps `ascendjob-port`: the operator's Service, whose port becomes MS_SCHED_PORT, is
        # made from the Scheduler's ports.
        scheduler = PodParts(container="ascend", port=port, labels=ring)
        replicas = [("scheduler", 1, scheduler), ("worker", request.nodes, worker)]
    else:
        channel = _job_channel_port(request, port.container_port)
        if channel is not None:
            worker = dataclasses.replace(worker, more_ports=(channel,))
        replicas = [(task, pods, worker) for task, pods in split(request.nodes)]
    specs: Dict[str, ReplicaSpec] = {
        task.capitalize(): ReplicaSpec(
            replicas=pods, restart_policy="Never", template=pod_template(request, parts)
        )
        for task, pods, parts in replicas
    }
    every_pod = sum(pods for _, pods, _ in replicas)
    policy = SchedulingPolicy(min_available=every_pod, queue=request.queue or "default")
    spec = AscendJobSpec(run_policy=AscendRunPolicy(scheduling_policy=policy), replica_specs=specs)
    labels = {"framework": label, **ring}
    if label == "pytorch" and replaces_lost_pods(request) and request.nodes > 1:
        labels.update(RESCHEDULING)
    return [AscendJob(metadata=metadata(request, labels), spec=spec)]


def _job_channel_port(request: RenderRequest, master_port: int) -> Optional[ContainerPort]:
    """The job channel's port, where the job has one (several pods, the channel on)."""
    port = request.job_port or master_port + 1
    if request.nodes < 2 or not request.job_channel or port > MAX_PORT:
        return None  # master port 65535 and no --job-port: the launcher says what to do
    return ContainerPort(name="malaunch-job", container_port=port)
