"""The variables platforms inject into a job's containers, in one list.

``malaunch simulate`` removes them from the environment it gives each simulated node (a node
must see only what the simulated platform gives it), and the test kit removes them so the
machine running the tests cannot leak into what the sources see. Each adds its own extras.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping

# Whole families: ModelArts/Octopus (MA_, DLS_, BATCH_), Volcano (VC_, VK_), Slurm, Kubeflow's
# torch elastic (PET_), torchrun's workers (TORCHELASTIC_), Open MPI (OMPI_), MPICH and Intel
# MPI (PMI_), PMIx (PMIX_: Open MPI 5, srun --mpi=pmix).
PLATFORM_PREFIXES = (
    "MA_", "VC_", "VK_", "DLS_", "BATCH_", "SLURM_", "PET_", "TORCHELASTIC_", "OMPI_", "PMI_",
    "PMIX_",
)  # fmt: skip
PLATFORM_NAMES = frozenset(
    {
        # TensorFlow cluster descriptions (Kubeflow TFJob, Volcano's tensorflow plugin, scripts)
        "TF_CONFIG",
        "TF_PS_HOSTS",
        "TF_WORKER_HOSTS",
        "TF_CHIEF_HOSTS",
        # HCCL rank tables and what Ascend bootstraps derive from them
        "RANK_TABLE_FILE",
        "RANK_TABLE_FILE_V_1_0",
        "RANK_ID",
        "RANK_SIZE",
        "DEVICE_ID",
        "ASCEND_DEVICE_ID",
        "JOB_ID",
        "ASCEND_VISIBLE_DEVICES",
        # MindX ascend-operator (MindSpore)
        "MS_ROLE",
        "MS_SCHED_HOST",
        "MS_SCHED_PORT",
        "MS_WORKER_NUM",
        "MS_LOCAL_WORKER",
        "MS_NODE_RANK",
        "MINDX_TASK_ID",
        # MindX ascend-operator (common, PyTorch, TensorFlow)
        "MINDX_SERVER_IP",
        "MINDX_SERVER_DOMAIN",
        "REPLICA_TYPE",
        "HCCL_LOGIC_SUPERPOD_ID",
        "NPU_POD",
        "CM_CHIEF_IP",
        "CM_CHIEF_PORT",
        "CM_CHIEF_DEVICE",
        "CM_WORKER_IP",
        "CM_RANK",
        "CM_LOCAL_WORKER",
        "CM_WORKER_SIZE",
        # Octopus / ModelArts data paths
        "DATASET",
        "DATASET_MAP",
        "DATASET_PATH",
        "CACHED_DATASET",
        "RESULT",
        "MODEL",
        "MODEL_PATH",
        "TMP_RESULT_PATH",
        # Node- or process-level rendezvous variables (Kubeflow, Volcano's pytorch plugin, torchrun)
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "TORCHELASTIC_RUN_ID",
    }
)


def without_platform_vars(
    environ: Mapping[str, str],
    extra_prefixes: Iterable[str] = (),
    extra_names: Iterable[str] = (),
) -> Dict[str, str]:
    """``environ`` minus every platform variable, and minus the caller's own extras."""
    prefixes = (*PLATFORM_PREFIXES, *extra_prefixes)
    names = PLATFORM_NAMES.union(extra_names)
    return {
        key: value
        for key, value in environ.items()
        if not key.startswith(prefixes) and key not in names
    }
