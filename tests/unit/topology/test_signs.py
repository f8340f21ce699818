"""Never silently alone: the refusals of ``--topology auto`` (malaunch.topology.signs)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from malaunch.errors import ExitCode, TopologyError
from malaunch.hookspecs import hookimpl
from malaunch.models import Framework, LaunchPlan, ResolveOptions, Topology
from malaunch.pipeline import resolve_topology
from malaunch.plugins import Origin, PluginSet, load_plugins
from malaunch.testing import read_env_file
from malaunch.topology import signs
from malaunch.topology.platform_env import without_platform_vars

SHARED = Path(__file__).parents[2] / "fixtures" / "shared"
# The frameworks stay: they declare their launchers' variables (torch_ddp: torchrun's).
LOADER_ENV: Dict[str, str] = {}


def no_names() -> Tuple[str, ...]:
    return ("trainer-7", "10.9.9.9")


def shown(env: Dict[str, str]) -> List[str]:
    return [sign.shown() for sign in signs.job_signs(env, no_names)]


@pytest.fixture(scope="module")
def plugins() -> PluginSet:
    return load_plugins(LOADER_ENV)


def auto(plugins: PluginSet, env: Dict[str, str]) -> Topology:
    return resolve_topology(plugins, env, "auto", ResolveOptions(wait_timeout=0))


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WORLD_SIZE": "16"}, ["WORLD_SIZE=16"]),
        ({"WORLD_SIZE": "1", "RANK": "0"}, []),
        ({"RANK": "3"}, ["RANK=3"]),
        ({"WORLD_SIZE": "many"}, ["WORLD_SIZE=many"]),
        ({"MASTER_ADDR": "job-master-0"}, ["MASTER_ADDR=job-master-0"]),
        ({"MASTER_ADDR": "127.0.0.1"}, []),
        ({"MASTER_ADDR": "::1"}, []),
        ({"MASTER_ADDR": "localhost"}, []),
        ({"MASTER_ADDR": "10.9.9.9"}, []),  # this machine's own address
        ({"MASTER_ADDR": "Trainer-7"}, []),  # this machine's name
        ({"PET_NPROC_PER_NODE": "8", "PET_MAX_RESTARTS": "3"},
         ["PET_MAX_RESTARTS=3", "PET_NPROC_PER_NODE=8"]),
        ({"VC_PS_HOSTS": "a,b", "VC_WORKER_HOSTS": "c"}, ["VC_PS_HOSTS=a,b"]),
        ({"VC_WORKER_NUM": "2", "VC_MASTER_NUM": "1"}, ["VC_WORKER_NUM=2"]),
        ({"OMPI_COMM_WORLD_SIZE": "4", "PMI_SIZE": "1"}, ["OMPI_COMM_WORLD_SIZE=4"]),
        ({"SLURM_NTASKS": "8", "SLURM_NNODES": "1"}, ["SLURM_NTASKS=8"]),
        ({"MA_NUM_HOSTS": "2"}, ["MA_NUM_HOSTS=2"]),
        ({"CUDA_VISIBLE_DEVICES": "0,1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": " "}, []),
        ({"NODE_RANK": "1"}, ["NODE_RANK=1"]),
        ({"NODE_RANK": "0"}, []),
        ({"GROUP_WORLD_SIZE": "2"}, ["GROUP_WORLD_SIZE=2"]),
        ({"GROUP_WORLD_SIZE": "1"}, []),
        ({"SLURM_PROCID": "3", "SLURM_NPROCS": "4"}, ["SLURM_NPROCS=4", "SLURM_PROCID=3"]),
        ({"SLURM_PROCID": "0", "SLURM_NPROCS": "1"}, []),
        ({"PMIX_RANK": "1", "PMIX_NAMESPACE": "prterun-node-1@1"}, ["PMIX_RANK=1"]),
        ({"PMIX_RANK": "0", "PMIX_NAMESPACE": "prterun-node-1@1"}, []),
        ({"LOCAL_RANK": "0,1,2,3"}, ["LOCAL_RANK=0,1,2,3"]),
        ({"LOCAL_RANK": "3"}, []),  # one process's local rank says nothing of other nodes
        ({"MS_ROLE": "MS_WORKER", "MS_SCHED_HOST": "192.0.2.5"},
         ["MS_ROLE=MS_WORKER", "MS_SCHED_HOST=192.0.2.5"]),
        ({"MS_ROLE": "MS_WORKER", "MS_SCHED_HOST": "127.0.0.1"}, []),  # msrun on one machine
        ({"MS_ROLE": "MS_SCHED", "MS_SCHED_HOST": "10.9.9.9"}, []),  # the scheduler's own IP
        ({"MS_SCHED_HOST": "192.0.2.5"}, []),  # no role: not a MindSpore cluster's process
    ],
)  # fmt: skip
def test_signs_of_a_distributed_job(env: Dict[str, str], expected: List[str]) -> None:
    assert shown(env) == expected


def test_long_values_are_cut() -> None:
    value = "x" * 50
    assert shown({"PET_RDZV_CONF": value}) == [f"PET_RDZV_CONF={'x' * 40}..."]


def refused(env: Dict[str, str]) -> str:
    with pytest.raises(TopologyError) as info:
        signs.refuse_alone(env, no_names)
    assert info.value.exit_code == ExitCode.DATA_ERROR
    return str(info.value)


PREFIX = "no topology source matched, but this environment shows a distributed job "
LOCAL = ", or run alone on purpose with --topology local"
NO_SOURCE = "; name a plugin's source with --topology"
POD_NEEDS = (
    "as they are: kubeflow needs PET_NNODES and mindx-pytorch LOCAL_WORLD_SIZE, both taking "
    "RANK as this node's rank"
)
MINDX_POD = {"RANK": "1", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "192.0.2.9"}
BARE = {"RANK": "1", "WORLD_SIZE": "16", "MASTER_ADDR": "192.0.2.9"}
BARE_SHOWN = "(WORLD_SIZE=16, RANK=1, MASTER_ADDR=192.0.2.9): "


@pytest.mark.parametrize(
    ("env", "message"),
    [
        # A MindX pod short of MINDX_TASK_ID: kubeflow would make 16 nodes of 1 process.
        (MINDX_POD, BARE_SHOWN + "name its source with --topology mindx-pytorch"),
        ({**BARE, "LOCAL_RANK": "0,1,2,3,4,5,6,7"},
         "(WORLD_SIZE=16, RANK=1, LOCAL_RANK=0,1,2,3,4,5,6,7, MASTER_ADDR=192.0.2.9): "
         "name its source with --topology mindx-pytorch"),
        # A MindX pod of one NPU: its LOCAL_RANK list is "0".
        ({**BARE, "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "LOCAL_RANK": "0"},
         "(WORLD_SIZE=2, RANK=1, MASTER_ADDR=192.0.2.9): name its source with "
         "--topology mindx-pytorch"),
        # An older PyTorchJob (no PET_*): WORLD_SIZE counts pods, which kubeflow reads.
        ({"WORLD_SIZE": "3", "RANK": "1", "MASTER_ADDR": "bert-master-0"},
         "(WORLD_SIZE=3, RANK=1, MASTER_ADDR=bert-master-0): name its source with "
         "--topology kubeflow"),
        # ... and its master pod, told MASTER_ADDR=localhost.
        ({"WORLD_SIZE": "3", "RANK": "0", "MASTER_ADDR": "localhost",
          "HOSTNAME": "bert-master-0"},
         "(WORLD_SIZE=3): name its source with --topology kubeflow"),
        # Bare torch-style variables: nothing built in reads them for what they are.
        (BARE, BARE_SHOWN + "no built-in source reads these " + POD_NEEDS + NO_SOURCE),
        ({"WORLD_SIZE": "3", "MASTER_ADDR": "localhost"},
         "(WORLD_SIZE=3): no built-in source reads these " + POD_NEEDS + NO_SOURCE),
        # torchrun's worker variables (minus its markers): one process's, not a node's.
        ({**read_env_file(SHARED / "torchrun_worker_env.env"),
          "TORCHELASTIC_RUN_ID": "", "GROUP_RANK": ""},
         "(WORLD_SIZE=16, RANK=11, GROUP_WORLD_SIZE=2, MASTER_ADDR=192.0.2.21): no built-in "
         "source reads these as they are: with LOCAL_RANK=3 they are one process's, as another "
         "launcher gives its workers" + NO_SOURCE),
        ({"MS_ROLE": "MS_WORKER", "MS_SCHED_HOST": "192.0.2.5", "MS_SCHED_PORT": "8118"},
         "(MS_ROLE=MS_WORKER, MS_SCHED_HOST=192.0.2.5): name its source with --topology mindx"),
        ({"NODE_RANK": "1"}, "(NODE_RANK=1): no built-in source reads these" + NO_SOURCE),
        ({"GROUP_WORLD_SIZE": "2"},
         "(GROUP_WORLD_SIZE=2): no built-in source reads these" + NO_SOURCE),
        ({"SLURM_PROCID": "3"}, "(SLURM_PROCID=3): name its source with --topology slurm"),
        ({"SLURM_NPROCS": "4"}, "(SLURM_NPROCS=4): name its source with --topology slurm"),
        ({"PMIX_RANK": "2", "PMIX_NAMESPACE": "prterun-node-1@1"},
         "(PMIX_RANK=2): no built-in source reads these" + NO_SOURCE),
        ({"OMPI_COMM_WORLD_SIZE": "4"},
         "(OMPI_COMM_WORLD_SIZE=4): no built-in source reads these" + NO_SOURCE),
        # Some signs a source reads, some none: both said.
        ({"SLURM_NTASKS": "4", "WORLD_SIZE": "4", "NODE_RANK": "1"},
         "(WORLD_SIZE=4, NODE_RANK=1, SLURM_NTASKS=4): name its source with --topology slurm "
         "(no built-in source reads WORLD_SIZE, NODE_RANK " + POD_NEEDS + ")"),
        ({"SLURM_NTASKS": "4", "PMIX_RANK": "1"},
         "(PMIX_RANK=1, SLURM_NTASKS=4): name its source with --topology slurm "
         "(no built-in source reads PMIX_RANK)"),
    ],
)  # fmt: skip
def test_refusal_names_what_it_saw_and_the_source_that_reads_it(
    env: Dict[str, str], message: str
) -> None:
    assert refused(env) == PREFIX + message + LOCAL


def test_refusal_lists_six_signs_at_most() -> None:
    env = {f"PET_V{i}": "1" for i in range(8)}
    with pytest.raises(TopologyError, match=r"PET_V5=1, \.\.\. \(2 more\)\)"):
        signs.refuse_alone(env, no_names)


def test_the_advice_names_only_unread_signs_it_shows() -> None:
    env = {
        "SLURM_NTASKS": "8", "SLURM_NPROCS": "8", "SLURM_PROCID": "3", "SLURM_NNODES": "2",
        "SLURM_JOB_NUM_NODES": "2", "CM_WORKER_SIZE": "2", "MASTER_ADDR": "192.0.2.9",
    }  # fmt: skip
    assert refused(env) == PREFIX + (
        "(SLURM_NTASKS=8, SLURM_NPROCS=8, SLURM_PROCID=3, SLURM_NNODES=2, SLURM_JOB_NUM_NODES=2, "
        "CM_WORKER_SIZE=2, ... (1 more)): name its source with --topology slurm or "
        "--topology mindx-tensorflow" + LOCAL
    )


def test_simulate_and_the_test_kit_strip_every_sign() -> None:
    # Both build node environments from this machine's: a sign left in would make every
    # simulated node (or test) on an MPI or Slurm host refuse as "alone in a job".
    env = {
        "WORLD_SIZE": "2", "RANK": "1", "NODE_RANK": "1", "GROUP_WORLD_SIZE": "2",
        "MA_NUM_HOSTS": "2", "OMPI_COMM_WORLD_SIZE": "2", "PMI_SIZE": "2", "PMIX_RANK": "1",
        "SLURM_NTASKS": "2", "SLURM_NPROCS": "2", "SLURM_PROCID": "1", "SLURM_NNODES": "2",
        "SLURM_JOB_NUM_NODES": "2", "MS_WORKER_NUM": "2", "CM_WORKER_SIZE": "2",
        "LOCAL_RANK": "0,1", "MASTER_ADDR": "192.0.2.9", "MS_ROLE": "MS_WORKER",
        "MS_SCHED_HOST": "192.0.2.5", "PET_NNODES": "2", "VC_WORKER_HOSTS": "a,b",
    }  # fmt: skip
    assert len(signs.job_signs(env, no_names)) == len(env)  # each variable above is a sign
    assert signs.job_signs(without_platform_vars(env), no_names) == []


def test_no_refusal_without_signs() -> None:
    signs.refuse_alone({"PATH": "/usr/bin", "WORLD_SIZE": "1"}, no_names)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"MALAUNCH_CONTEXT": "{}"},
            "nested launch: MALAUNCH_CONTEXT is set, so this runs inside a malaunch worker that "
            "already has its rank; run the command itself there, or start a separate job on "
            "purpose with --topology local",
        ),
        (
            {"TORCHELASTIC_RUN_ID": "none", "GROUP_RANK": "1"},
            "nested launch: TORCHELASTIC_RUN_ID and GROUP_RANK are set, so this runs inside a "
            "torchrun worker (framework torch_ddp) that already has its rank; run the command "
            "itself there, or start a separate job on purpose with --topology local",
        ),
        (
            {"PADDLE_TRAINER_ID": "1", "GROUP_RANK": "1"},
            "nested launch: PADDLE_TRAINER_ID and GROUP_RANK are set, so this runs inside a "
            "worker of framework paddle's launcher that already has its rank; run the command "
            "itself there, or start a separate job on purpose with --topology local",
        ),
    ],
)
def test_nested_launch(env: Dict[str, str], message: str) -> None:
    declared = [
        ("PADDLE_TRAINER_ID", "worker of framework paddle's launcher"),
        ("TORCHELASTIC_RUN_ID", "torchrun worker (framework torch_ddp)"),
        ("GROUP_RANK", "torchrun worker (framework torch_ddp)"),
    ]
    with pytest.raises(TopologyError) as info:
        signs.check_not_nested(env, declared)
    assert str(info.value) == message


def test_only_malaunch_itself_is_known_without_declarations() -> None:
    signs.check_not_nested({"TORCHELASTIC_RUN_ID": "none", "GROUP_RANK": "1"})


def test_is_local() -> None:
    assert signs.is_local("[::1]", no_names)
    assert signs.is_local("0.0.0.0", no_names)
    assert not signs.is_local("192.0.2.1", no_names)
    assert signs.is_local("LOCALHOST", lambda: ())


# --- through the pipeline --------------------------------------------------------------------


def test_auto_refuses_to_fall_back_to_local(plugins: PluginSet) -> None:
    with pytest.raises(TopologyError, match=r"\(WORLD_SIZE=4\): no built-in source reads"):
        auto(plugins, {"WORLD_SIZE": "4"})


def test_the_source_a_refusal_names_reads_the_job_right(plugins: PluginSet) -> None:
    # A MindX pod without MINDX_TASK_ID: 2 pods of 8 NPUs. The advice must lead there, not to
    # kubeflow, which would read WORLD_SIZE=16 as 16 nodes (and now refuses to).
    env = {"RANK": "1", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "192.0.2.9"}
    with pytest.raises(TopologyError, match=r"name its source with --topology mindx-pytorch,"):
        auto(plugins, env)
    topo = resolve_topology(plugins, env, "mindx-pytorch", ResolveOptions())
    assert (topo.nnodes, topo.node_rank, topo.world_size) == (2, 1, 16)
    with pytest.raises(TopologyError, match=r"^PET_NNODES is not set, and WORLD_SIZE=16 cannot"):
        resolve_topology(plugins, env, "kubeflow", ResolveOptions())
    # An older PyTorchJob's worker: kubeflow, and it reads WORLD_SIZE as the pods it counts.
    env = {"RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "bert-master-0"}
    with pytest.raises(TopologyError, match=r"name its source with --topology kubeflow,"):
        auto(plugins, env)
    topo = resolve_topology(plugins, env, "kubeflow", ResolveOptions(nproc_per_node=8))
    assert (topo.nnodes, topo.node_rank, topo.world_size) == (3, 1, 24)


def test_named_local_is_the_escape_hatch(plugins: PluginSet) -> None:
    env = {"WORLD_SIZE": "4", "MALAUNCH_CONTEXT": "{}"}
    topo = resolve_topology(plugins, env, "local", ResolveOptions(nproc_per_node=1))
    assert topo.source == "local"


def test_auto_refuses_a_nested_launch_even_where_a_source_matches(plugins: PluginSet) -> None:
    env = {**read_env_file(SHARED / "volcano_env_3workers.env"), "MALAUNCH_CONTEXT": "{}"}
    with pytest.raises(TopologyError, match=r"^nested launch: MALAUNCH_CONTEXT is set"):
        auto(plugins, env)
    del env["MALAUNCH_CONTEXT"]
    assert auto(plugins, env).source == "volcano"


def test_a_torchrun_worker_is_refused(plugins: PluginSet) -> None:
    env = read_env_file(SHARED / "torchrun_worker_env.env")
    with pytest.raises(TopologyError, match=r"^nested launch: TORCHELASTIC_RUN_ID and GROUP_RANK"):
        auto(plugins, env)


def test_a_plain_local_run_is_not_refused(plugins: PluginSet) -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0", "MASTER_ADDR": "127.0.0.1", "WORLD_SIZE": "1"}
    assert auto(plugins, env).source == "local"


class FakePaddle:
    """A third-party framework that declares its launcher's variables."""

    @hookimpl
    def malaunch_register_frameworks(self) -> List[Framework]:
        return [
            Framework(
                name="fakepaddle",
                plan=lambda *args: LaunchPlan.model_validate({}),
                launcher="paddle.distributed.launch",
                launcher_vars=("PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM"),
            )
        ]


def test_a_frameworks_declared_launcher_is_refused_naming_it() -> None:
    fake = (FakePaddle(), Origin("fakepaddle", "malaunch-fakepaddle", "1"))
    plugins = load_plugins({"MALAUNCH_DISABLE_PLUGINS": "paddle"}, extra=[fake])
    # What paddle.distributed.launch gives a worker: on today's main this planned one node.
    env = {"PADDLE_TRAINER_ID": "1", "PADDLE_TRAINERS_NUM": "4", "PADDLE_CURRENT_ENDPOINT": "x"}
    with pytest.raises(TopologyError) as info:
        auto(plugins, env)
    assert str(info.value).startswith(
        "nested launch: PADDLE_TRAINER_ID and PADDLE_TRAINERS_NUM are set, so this runs inside "
        "a paddle.distributed.launch worker (framework fakepaddle) that already has its rank;"
    )
    assert info.value.exit_code == ExitCode.DATA_ERROR
    assert resolve_topology(plugins, env, "local", ResolveOptions()).source == "local"
