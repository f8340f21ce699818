"""A Volcano Job (``batch.volcano.sh/v1alpha1``) whose pods start malaunch.

Tasks by framework: ``torch_ddp`` gets a ``master`` task (1 pod) and a ``worker`` task (the
rest) with Volcano's ``pytorch`` plugin, whose ``MASTER_ADDR`` is the master pod (the
``volcano-tasks`` source reads this layout); ``tensorflow_ps`` gets ``ps`` and ``worker`` tasks
(and with ``--chief`` a ``chief`` task of 1 pod first) with the ``tensorflow`` plugin's
``TF_CONFIG`` (``tf-config`` source), the job completing when its chief has, else when its
workers have; any other framework one ``worker`` task (``volcano`` source). Every job has
the ``env`` and ``svc`` plugins, ``minAvailable`` = every pod (gang scheduling) and policies
keyed on malaunch's exit codes:

=====================  ================  ===================================================
when                   action            why
=====================  ================  ===================================================
pod evicted            ``RestartPod``    a lost node: its pod alone comes back and rejoins
exit 137, 143          ``RestartPod``    its launcher was killed or stopped: the same
exit 69                ``RestartJob``    topology or peers not ready in ``--wait-timeout``
exit 64, 65, 66, 78    ``TerminateJob``  usage, input or plugin error: a rerun fails alike
=====================  ================  ===================================================

The other launchers wait ``--rejoin-timeout`` for a replaced pod while restarts remain (SPEC
§9 "Replacement"): only the lost pod is recreated, never the healthy ones. Where they do not
wait (no ``--max-restarts``, ``--rejoin-timeout 0``, ``--no-job-channel``), a lost pod ends
the job's attempt on every launcher, so an evicted pod restarts the whole job
(``RestartJob``) and 137 and 143 have no policy. ``RestartPod``
came with Volcano 1.11 (``volcano-sh/apis`` #143); an older controller refuses the action, and
``RestartTask`` there recreates every pod of the task. Any other failure (a worker's own code,
75 on the nodes it stopped, 124 for a hang) fails the job once every pod has ended.
``maxRetry`` is ``--platform-restarts`` + 1: Volcano counts the restart that fails the job, and
would turn 0 into 3.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from malaunch.render.crds import VolcanoJob, VolcanoJobSpec, VolcanoPolicy, VolcanoTask
from malaunch.render.k8s import K8sModel
from malaunch.render.request import (
    PodParts,
    RenderRequest,
    layout,
    metadata,
    pod_template,
    replaces_lost_pods,
    split,
)

PYTORCH_PORT = 23456  # the pytorch plugin's default --port
TENSORFLOW_PORT = 2222  # the tensorflow plugin's default --port
REPLACE_CODES = (137, 143)  # the launcher SIGKILLed (a kill, the OOM killer) or SIGTERMed
RESTART_CODES = (69,)
TERMINATE_CODES = (64, 65, 66, 78)
POLICIES = (
    *(VolcanoPolicy(exit_code=code, action="RestartJob") for code in RESTART_CODES),
    *(VolcanoPolicy(exit_code=code, action="TerminateJob") for code in TERMINATE_CODES),
)
# A lost pod: recreated alone where its launcher is awaited, else the whole job restarts.
REPLACE_POD = (
    VolcanoPolicy(event="PodEvicted", action="RestartPod"),
    *(VolcanoPolicy(exit_code=code, action="RestartPod") for code in REPLACE_CODES),
)
RESTART_JOB_ON_EVICTION = (VolcanoPolicy(event="PodEvicted", action="RestartJob"),)
COMPLETE_WITH_TASK = (VolcanoPolicy(event="TaskCompleted", action="CompleteJob"),)


def _tasks(request: RenderRequest) -> List[Tuple[str, int, int]]:
    """(task, pods, accelerators per pod) in the order the job lists them."""
    shape = layout(request.framework)
    if shape == "torch":
        return [(task, pods, request.nproc) for task, pods in split(request.nodes)]
    if shape == "ps":
        chief = [("chief", 1, request.nproc)] if request.chief else []
        return [*chief, ("ps", request.num_ps, 0), ("worker", request.nodes, request.nproc)]
    return [("worker", request.nodes, request.nproc)]


def _completing_task(request: RenderRequest) -> str:
    """The task whose completion completes a parameter-server job: the chief when the job
    succeeds with it (malaunch's --success-policy), else the workers."""
    return "chief" if request.chief and request.success_policy != "all-workers" else "worker"


def _plugins(request: RenderRequest) -> Dict[str, Tuple[str, ...]]:
    plugins: Dict[str, Tuple[str, ...]] = {"env": (), "svc": ()}
    shape = layout(request.framework)
    if shape == "torch":
        port = request.master_port or PYTORCH_PORT
        plugins["pytorch"] = ("--master=master", "--worker=worker", f"--port={port}")
    elif shape == "ps":
        port = request.master_port or TENSORFLOW_PORT
        chief = ("--chief=chief",) if request.chief else ()
        plugins["tensorflow"] = (*chief, "--ps=ps", "--worker=worker", f"--port={port}")
    return plugins


def render(request: RenderRequest) -> List[K8sModel]:
    """The Volcano Job."""
    completing = _completing_task(request) if layout(request.framework) == "ps" else None
    tasks = tuple(
        VolcanoTask(
            name=task,
            replicas=pods,
            # Never: a failed container must fail its pod, or the exit-code policies never fire.
            template=pod_template(
                request, PodParts(container=task, accelerators=count, restart_policy="Never")
            ),
            policies=COMPLETE_WITH_TASK if task == completing else None,
        )
        for task, pods, count in _tasks(request)
    )
    spec = VolcanoJobSpec(
        min_available=sum(task.replicas for task in tasks),
        max_retry=request.platform_restarts + 1,
        queue=request.queue,
        plugins=_plugins(request),
        policies=(
            *(REPLACE_POD if replaces_lost_pods(request) else RESTART_JOB_ON_EVICTION),
            *POLICIES,
        ),
        tasks=tasks,
    )
    return [VolcanoJob(metadata=metadata(request), spec=spec)]
