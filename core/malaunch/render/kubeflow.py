"""Kubeflow training-operator v1 jobs (``kubeflow.org/v1``) whose pods start malaunch.

**PyTorchJob**: a ``Master`` replica (1 pod) and ``Worker`` replicas (the rest), container
``pytorch`` with its ``pytorchjob-port``, ``nprocPerNode`` = ``--nproc-per-node``: the operator
then injects ``MASTER_ADDR``, ``PET_NNODES``, ``PET_NODE_RANK`` and ``PET_NPROC_PER_NODE``, which
the ``kubeflow`` source reads. **TFJob** (``tensorflow_ps`` only): ``PS`` and ``Worker``
replicas (and with ``--chief`` a ``Chief`` replica of 1 pod), container ``tensorflow`` with its
``tfjob-port``; the operator's ``TF_CONFIG`` is read by the ``tf-config`` source, and the pods
still running when the job has succeeded are cleaned up (``cleanPodPolicy: Running``). The
operator's default success policy, the chief's success (else worker 0's), is malaunch's with a
chief; ``--success-policy all-workers`` renders ``successPolicy: AllWorkers``.

Replicas restart by exit code (``restartPolicy: ExitCode``): the training operator recreates a
pod whose container exited 128 or above (a signal: the launcher killed, 137, or stopped, 143)
and fails the job on 1-127 (malaunch's own codes, 75 on the nodes another node stopped, a
worker's code). A recreated pod is a lost node's replacement: it rejoins the job, whose other
launchers wait ``--rejoin-timeout`` while restarts remain (SPEC §9 "Replacement"), so only
the lost pod starts again; ``--max-restarts`` covers ranks that fail while their launcher
stays up. Where the launchers do not wait (no ``--max-restarts``, ``--rejoin-timeout 0``,
``--no-job-channel``), pods never restart by themselves (``restartPolicy: Never``): a pod
recreated alone would wait ``--wait-timeout`` for a job that has ended.
"""

from __future__ import annotations

from typing import List

from malaunch.errors import UsageError
from malaunch.render.crds import (
    PyTorchJob,
    PyTorchJobSpec,
    ReplicaSpec,
    RunPolicy,
    TFJob,
    TFJobSpec,
)
from malaunch.render.k8s import ContainerPort, K8sModel
from malaunch.render.request import (
    PodParts,
    RenderRequest,
    layout,
    metadata,
    pod_template,
    replaces_lost_pods,
    split,
)

PYTORCH_PORT = 23456  # the training operator's default pytorchjob-port
TENSORFLOW_PORT = 2222  # its default tfjob-port
REPLACED = "ExitCode"  # 128+: retryable (the pod is recreated); 1-127: permanent


def _replica(request: RenderRequest, pods: int, parts: PodParts) -> ReplicaSpec:
    return ReplicaSpec(
        replicas=pods,
        restart_policy=REPLACED if replaces_lost_pods(request) else "Never",
        template=pod_template(request, parts),
    )


def render_pytorchjob(request: RenderRequest) -> List[K8sModel]:
    """The PyTorchJob: Master + Worker replicas."""
    if layout(request.framework) == "ps":
        msg = (
            "render pytorchjob: tensorflow_ps needs parameter servers: use render tfjob or volcano"
        )
        raise UsageError(msg)
    port = ContainerPort(name="pytorchjob-port", container_port=request.master_port or PYTORCH_PORT)
    parts = PodParts(container="pytorch", accelerators=request.nproc, port=port)
    replicas = {
        task.capitalize(): _replica(request, pods, parts) for task, pods in split(request.nodes)
    }
    spec = PyTorchJobSpec(
        run_policy=RunPolicy(clean_pod_policy="None"),
        nproc_per_node=str(request.nproc),
        pytorch_replica_specs=replicas,
    )
    return [PyTorchJob(metadata=metadata(request), spec=spec)]


def render_tfjob(request: RenderRequest) -> List[K8sModel]:
    """The TFJob: (Chief +) PS + Worker replicas."""
    if layout(request.framework) != "ps":
        msg = (
            f"render tfjob: framework {request.framework!r} does not run TensorFlow parameter "
            "servers: use --framework tensorflow_ps, or render volcano / pytorchjob"
        )
        raise UsageError(msg)
    port = ContainerPort(name="tfjob-port", container_port=request.master_port or TENSORFLOW_PORT)
    ps = PodParts(container="tensorflow", port=port)
    worker = PodParts(container="tensorflow", accelerators=request.nproc, port=port)
    chief = {"Chief": _replica(request, 1, worker)} if request.chief else {}
    spec = TFJobSpec(
        run_policy=RunPolicy(clean_pod_policy="Running"),
        success_policy="AllWorkers" if request.success_policy == "all-workers" else None,
        tf_replica_specs={
            **chief,
            "PS": _replica(request, request.num_ps, ps),
            "Worker": _replica(request, request.nodes, worker),
        },
    )
    return [TFJob(metadata=metadata(request), spec=spec)]
