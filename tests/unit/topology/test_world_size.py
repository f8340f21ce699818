"""The job's world size is held to MAX_WORLD_SIZE by every source that multiplies nodes by
processes per node, before a single rank is built (10^9 ranks would never finish)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict

import pytest

from malaunch.errors import TopologyError
from malaunch.models import ResolveOptions, Topology
from malaunch.numbers import MAX_WORLD_SIZE, check_world_size
from malaunch.testing import read_env_file
from malaunch.topology import kubeflow, mindx, mindx_collective, slurm, volcano, volcano_tasks

FIXTURES = Path(__file__).parents[2] / "fixtures"
Resolve = Callable[[Dict[str, str], ResolveOptions], Topology]


def env_file(name: str, **changes: str) -> Dict[str, str]:
    env = read_env_file(FIXTURES / name)
    env.update(changes)
    return env


def test_the_limit_is_a_product_checked_at_the_boundary() -> None:
    assert MAX_WORLD_SIZE == 200_000
    check_world_size(1000, 200, "n")  # exactly the limit: allowed
    with pytest.raises(TopologyError) as info:
        check_world_size(1000, 201, "A=1000 x B=201")
    assert str(info.value) == "A=1000 x B=201 gives 201000 ranks; at most 200000 in one job"


WORKERS = ",".join(f"w{i}" for i in range(30_000))
CASES = [
    pytest.param(
        kubeflow.resolve,
        env_file("env/kubeflow_pytorchjob_worker.env", PET_NNODES="100000",
                 PET_NPROC_PER_NODE="10000"),
        ResolveOptions(),
        "PET_NNODES=100000 x PET_NPROC_PER_NODE=10000 gives 1000000000 ranks",
        id="kubeflow",
    ),
    pytest.param(
        kubeflow.resolve,
        env_file("env/kubeflow_pytorchjob_worker.env", PET_NNODES="50000"),
        ResolveOptions(nproc_per_node=5),
        "PET_NNODES=50000 x --nproc-per-node=5 gives 250000 ranks",
        id="kubeflow-option",
    ),
    pytest.param(
        volcano.resolve,
        {"VC_WORKER_HOSTS": WORKERS, "VC_TASK_INDEX": "0", "MA_NUM_GPUS": "8"},
        ResolveOptions(),
        "VC_WORKER_HOSTS (30000 hosts) x MA_NUM_GPUS=8 gives 240000 ranks",
        id="volcano",
    ),
    pytest.param(
        volcano_tasks.resolve,
        env_file("env/volcano_pytorch_worker.env", VC_WORKER_NUM="30001", MA_NUM_GPUS="8",
                 VC_WORKER_HOSTS=f"resnet-worker-0.resnet,{WORKERS}"),
        ResolveOptions(),
        "VC_MASTER_HOSTS + VC_WORKER_HOSTS (30002 hosts) x MA_NUM_GPUS=8 gives 240016 ranks",
        id="volcano-tasks",
    ),
    pytest.param(
        slurm.resolve,
        {"SLURM_JOB_NODELIST": "n[0-29999]", "SLURM_NODEID": "0", "SLURM_NTASKS_PER_NODE": "8"},
        ResolveOptions(),
        "SLURM_JOB_NODELIST (30000 nodes) with SLURM_NTASKS_PER_NODE gives 240000 ranks",
        id="slurm",
    ),
    pytest.param(
        mindx.resolve,
        env_file("shared/mindx_operator_mindspore_env.env", MS_WORKER_NUM="200000"),
        ResolveOptions(nproc_per_node=9),
        "25000 worker pods x 9 processes gives 225000 ranks",
        id="mindx-option",
    ),
    pytest.param(
        mindx_collective.resolve_pytorch,
        env_file("env/mindx_operator_pytorch_env.env", WORLD_SIZE="200000"),
        ResolveOptions(nproc_per_node=9),
        "25000 NPU pods x 9 processes gives 225000 ranks",
        id="mindx-pytorch-option",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("resolve", "env", "options", "message"), CASES)
def test_sources_refuse_a_job_past_the_limit(
    resolve: Resolve, env: Dict[str, str], options: ResolveOptions, message: str
) -> None:
    with pytest.raises(TopologyError) as info:
        resolve(env, options)
    assert str(info.value) == f"{message}; at most 200000 in one job"
