"""Registers the built-in topology sources (declared as an entry point in pyproject.toml).

``auto_order`` follows SPEC §4: rank table, TF PS variables, ``TF_CONFIG``, Volcano/Octopus
variables, then local (whose ``detect`` always answers yes, so it comes last). The others fit
in where their variables cannot be mistaken for another platform's: Kubeflow's ``PET_*`` (32),
the MindX ascend-operator's MindSpore ``MS_*`` (35), PyTorch (36, ``MINDX_TASK_ID`` beside
``MASTER_ADDR``/``RANK``/``WORLD_SIZE``) and TensorFlow ``CM_*`` (37), Volcano jobs with a task
other than ``worker`` (38, before the one-task ``volcano`` source that would read only the
``worker`` task), and Slurm's (45).
"""

from __future__ import annotations

from typing import List

from malaunch.hookspecs import hookimpl
from malaunch.models import TopologySource


@hookimpl
def malaunch_register_topology_sources() -> List[TopologySource]:
    """The built-in sources, in ``auto`` order (see the module docstring)."""
    # Imported here, not at module level: a broken or missing source module then surfaces as
    # a plugin error naming this hook, instead of breaking every command at import time.
    from malaunch.topology import (  # noqa: PLC0415 (a broken source is a plugin error)
        kubeflow,
        local,
        mindx,
        mindx_collective,
        slurm,
        tf_config,
        tf_ps,
        volcano,
        volcano_tasks,
    )
    from malaunch.topology.ranktable import source as ranktable_source  # noqa: PLC0415 (as above)

    return [
        TopologySource(
            name="ranktable",
            resolve=ranktable_source.resolve,
            detect=ranktable_source.detect,
            auto_order=10,
            help="HCCL rank table (RANK_TABLE_FILE[_V_1_0], /user/config/jobstart_hccl.json)",
        ),
        TopologySource(
            name=tf_ps.SOURCE,
            resolve=tf_ps.resolve,
            detect=tf_ps.detect,
            auto_order=20,
            help="TF_PS_HOSTS / TF_WORKER_HOSTS with MA_TASK_NAME and VC_TASK_INDEX",
        ),
        TopologySource(
            name=tf_config.SOURCE,
            resolve=tf_config.resolve,
            detect=tf_config.detect,
            auto_order=30,
            help="TF_CONFIG JSON (Kubeflow TFJob, Volcano tensorflow plugin)",
        ),
        TopologySource(
            name=kubeflow.SOURCE,
            resolve=kubeflow.resolve,
            detect=kubeflow.detect,
            auto_order=32,
            help="Kubeflow PyTorchJob / Trainer PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR/PORT",
        ),
        TopologySource(
            name=mindx.SOURCE,
            resolve=mindx.resolve,
            detect=mindx.detect,
            auto_order=35,
            help="MindX ascend-operator MS_ROLE, MS_SCHED_HOST/PORT, MS_WORKER_NUM, MS_NODE_RANK",
        ),
        TopologySource(
            name=mindx_collective.PYTORCH.source,
            resolve=mindx_collective.resolve_pytorch,
            detect=mindx_collective.detect_pytorch,
            auto_order=36,
            help="MindX ascend-operator PyTorch: MINDX_TASK_ID, RANK (pod), WORLD_SIZE, "
            "LOCAL_WORLD_SIZE",
        ),
        TopologySource(
            name=mindx_collective.TENSORFLOW.source,
            resolve=mindx_collective.resolve_tensorflow,
            detect=mindx_collective.detect_tensorflow,
            auto_order=37,
            help="MindX ascend-operator TensorFlow: CM_CHIEF_IP/PORT, CM_RANK, CM_WORKER_SIZE",
        ),
        TopologySource(
            name=volcano_tasks.SOURCE,
            resolve=volcano_tasks.resolve,
            detect=volcano_tasks.detect,
            auto_order=38,
            help="Volcano jobs of several tasks: VC_<TASK>_HOSTS, HOSTNAME, MASTER_ADDR/PORT",
        ),
        TopologySource(
            name=volcano.SOURCE,
            resolve=volcano.resolve,
            detect=volcano.detect,
            auto_order=40,
            help="VC_WORKER_HOSTS or /etc/volcano, VC_TASK_INDEX, MA_NUM_HOSTS, MA_NUM_GPUS",
        ),
        TopologySource(
            name=slurm.SOURCE,
            resolve=slurm.resolve,
            detect=slurm.detect,
            auto_order=45,
            help="SLURM_STEP_NODELIST or SLURM_JOB_NODELIST, SLURM_NODEID, SLURM_GPUS_ON_NODE",
        ),
        TopologySource(
            name=local.SOURCE,
            resolve=local.resolve,
            detect=local.detect,
            auto_order=1000,
            help="this machine on 127.0.0.1 (--nproc-per-node or visible devices)",
        ),
    ]
