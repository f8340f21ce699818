"""The volcano-tasks source: Volcano Jobs of several tasks (master + worker, ps + worker, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from malaunch.errors import MissingInputError, TopologyError
from malaunch.models import ResolveOptions, Topology
from malaunch.testing import read_env_file
from malaunch.topology import volcano, volcano_tasks

FIXTURES = Path(__file__).parents[2] / "fixtures"
OPTIONS = ResolveOptions()
RESNET = ["resnet-master-0.resnet", "resnet-worker-0.resnet", "resnet-worker-1.resnet"]


@pytest.fixture
def pytorch_pod(tmp_path: Path) -> Dict[str, str]:
    """worker-0 of master(1) + worker(2) with the pytorch plugin; no mounted /etc/volcano."""
    env = read_env_file(FIXTURES / "env" / "volcano_pytorch_worker.env")
    env["MALAUNCH_VOLCANO_DIR"] = str(tmp_path / "none")
    return env


def ranks(topo: Topology) -> List[List[int]]:
    return [[d.rank for d in node.devices] for node in topo.nodes]


def test_master_pod_is_a_node_and_the_rendezvous_host(pytorch_pod: Dict[str, str]) -> None:
    assert volcano_tasks.detect(pytorch_pod)
    topo = volcano_tasks.resolve(pytorch_pod, ResolveOptions(nproc_per_node=2))
    assert topo.source == "volcano-tasks"
    assert [n.host for n in topo.nodes] == RESNET
    assert [n.name for n in topo.nodes] == [h.split(".")[0] for h in RESNET]
    assert [n.role for n in topo.nodes] == ["master", "worker", "worker"]
    assert topo.node_rank == 1  # the pytorch plugin's RANK too; VC_TASK_INDEX is 0
    assert ranks(topo) == [[0, 1], [2, 3], [4, 5]]
    assert topo.world_size == 6  # not the plugin's WORLD_SIZE=3 (pods)
    assert (topo.master_addr, topo.master_port) == ("resnet-master-0.resnet", 23456)
    assert topo.job_id == "resnet"


@pytest.mark.parametrize(
    ("hostname", "index", "node"),
    [("resnet-master-0", "0", 0), ("resnet-worker-0", "0", 1), ("resnet-worker-1", "1", 2)],
)
def test_every_pod_finds_its_place(
    pytorch_pod: Dict[str, str], hostname: str, index: str, node: int
) -> None:
    env = {**pytorch_pod, "HOSTNAME": hostname, "VC_TASK_INDEX": index}
    assert volcano_tasks.resolve(env, OPTIONS).node_rank == node


def test_the_worker_only_volcano_source_gets_this_job_wrong(pytorch_pod: Dict[str, str]) -> None:
    """The trap of issue 12: the one-task reading drops the master pod."""
    wrong = volcano.resolve(pytorch_pod, OPTIONS)
    assert (wrong.nnodes, wrong.node_rank, wrong.master_addr) == (2, 0, RESNET[1])


def test_task_order_master_chief_worker_then_by_name() -> None:
    tasks = {k: ["h"] for k in ("WORKER", "PS", "EVALUATOR", "CHIEF", "MASTER")}
    assert volcano_tasks.task_order(tasks, None) == [
        "MASTER", "CHIEF", "WORKER", "EVALUATOR", "PS",
    ]  # fmt: skip
    # The pytorch plugin's --master task comes first whatever its name.
    assert volcano_tasks.task_order(tasks, "PS")[0] == "PS"


def test_custom_master_task_named_by_master_addr() -> None:
    env = {
        "HOSTNAME": "j-trainer-1",
        "VC_LAUNCHER_HOSTS": "j-launcher-0.j",
        "VC_TRAINER_HOSTS": "j-trainer-0.j,j-trainer-1.j",
        "MASTER_ADDR": "j-launcher-0.j",
        "MALAUNCH_VOLCANO_DIR": "/nonexistent",
    }
    topo = volcano_tasks.resolve(env, OPTIONS)
    assert [n.role for n in topo.nodes] == ["launcher", "trainer", "trainer"]
    assert topo.node_rank == 2


def test_ps_and_worker_without_tensorflow_variables() -> None:
    env = {
        "HOSTNAME": "tf-ps-1",
        "VC_PS_HOSTS": "tf-ps-0.tf,tf-ps-1.tf",
        "VC_WORKER_HOSTS": "tf-worker-0.tf",
        "VC_TASK_INDEX": "1",
    }
    topo = volcano_tasks.resolve(env, OPTIONS)
    assert [n.host for n in topo.nodes] == ["tf-worker-0.tf", "tf-ps-0.tf", "tf-ps-1.tf"]
    assert topo.node_rank == 2
    assert topo.master_addr == "tf-worker-0.tf"
    assert topo.master_port is None


def test_task_names_with_dashes_and_ip_hosts() -> None:
    # Volcano spells task "data-loader" as VC_DATA_LOADER_HOSTS; hosts may be addresses.
    env = {
        "HOSTNAME": "job-1-data-loader-0",
        "VC_DATA_LOADER_HOSTS": "192.0.2.3",
        "VC_WORKER_HOSTS": "192.0.2.1,192.0.2.2",
    }
    topo = volcano_tasks.resolve(env, OPTIONS)
    assert [n.host for n in topo.nodes] == ["192.0.2.1", "192.0.2.2", "192.0.2.3"]
    assert [n.name for n in topo.nodes] == [None, None, None]
    assert topo.node_rank == 2
    assert topo.job_id == "job-1"


def test_modelarts_instance_name_and_task_name(pytorch_pod: Dict[str, str]) -> None:
    env = {**pytorch_pod, "MA_CURRENT_INSTANCE_NAME": "resnet-worker-1", "VC_TASK_INDEX": "1"}
    assert volcano_tasks.resolve(env, OPTIONS).node_rank == 2
    env = {**pytorch_pod, "MA_TASK_NAME": "worker", "VC_TASK_INDEX": "1"}
    del env["HOSTNAME"]
    assert volcano_tasks.resolve(env, OPTIONS).node_rank == 2


def test_hosts_from_mounted_files(tmp_path: Path) -> None:
    (tmp_path / "master.host").write_text("j-master-0.j")
    (tmp_path / "worker.host").write_text("j-worker-0.j\nj-worker-1.j")
    (tmp_path / "VC_WORKER_HOSTS").write_text("j-worker-0.j,j-worker-1.j")
    env = {"HOSTNAME": "j-worker-1", "VC_TASK_INDEX": "1", "MALAUNCH_VOLCANO_DIR": str(tmp_path)}
    assert volcano_tasks.detect(env)
    topo = volcano_tasks.resolve(env, OPTIONS)
    assert [n.host for n in topo.nodes] == ["j-master-0.j", "j-worker-0.j", "j-worker-1.j"]
    assert topo.node_rank == 2
    # Without Volcano's variables a stale /etc/volcano in an image is no job.
    assert not volcano_tasks.detect({"MALAUNCH_VOLCANO_DIR": str(tmp_path)})


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"VC_WORKER_HOSTS": "a,b"},  # one worker task: the volcano source's
        {"VC_MASTER_HOSTS": " "},
        {"VC_TASK_INDEX": "0", "MALAUNCH_VOLCANO_DIR": "/nonexistent"},
    ],
)
def test_not_detected(env: Dict[str, str]) -> None:
    assert not volcano_tasks.detect(env)


def test_detected_for_one_task_of_another_name() -> None:
    assert volcano_tasks.detect({"VC_TRAINER_HOSTS": "a,b"})


ERRORS: List[Tuple[Dict[str, str], Tuple[str, ...], str]] = [
    (
        {"VC_TASK_INDEX": "1"},
        (),
        "VC_TASK_INDEX=1 disagrees with HOSTNAME: worker pod 0",
    ),
    (
        {"HOSTNAME": "resnet-worker-5"},
        ("VC_TASK_INDEX",),
        "HOSTNAME: worker pod 5 is out of range for VC_WORKER_HOSTS (2 hosts)",
    ),
    (
        {"HOSTNAME": "somebody"},
        (),
        'HOSTNAME="somebody" is not <job>-<task>-<index> for a task of this job '
        "(master, worker): cannot tell which pod this is",
    ),
    (
        {},
        ("HOSTNAME",),
        "HOSTNAME is not set, so it is not <job>-<task>-<index> for a task of this job "
        "(master, worker): cannot tell which pod this is",
    ),
    (
        {"MASTER_ADDR": "resnet-worker-1.resnet"},
        (),
        'MASTER_ADDR="resnet-worker-1.resnet" is pod 1 of task worker: expected the first pod '
        "of a task",
    ),
    (
        {"MASTER_ADDR": "10.0.0.1"},
        (),
        'MASTER_ADDR="10.0.0.1" is none of the job\'s pods (VC_MASTER_HOSTS, VC_WORKER_HOSTS): '
        "Volcano's pytorch plugin sets the first pod of its master task there",
    ),
    (
        {"VC_WORKER_NUM": "3"},
        (),
        "VC_WORKER_NUM=3 does not match VC_WORKER_HOSTS, which lists 2 hosts",
    ),
    ({"MA_NUM_GPUS": "20000"}, (), 'MA_NUM_GPUS="20000": expected at most 10000'),
]


@pytest.mark.parametrize(("changes", "removed", "message"), ERRORS)
def test_errors_name_the_variable(
    pytorch_pod: Dict[str, str], changes: Dict[str, str], removed: Tuple[str, ...], message: str
) -> None:
    env = {**pytorch_pod, **changes}
    for name in removed:
        del env[name]
    with pytest.raises(TopologyError) as info:
        volcano_tasks.resolve(env, OPTIONS)
    assert str(info.value) == message


def test_pod_name_ending_in_two_task_names_is_ambiguous() -> None:
    env = {
        "HOSTNAME": "j-a-worker-0",
        "VC_WORKER_HOSTS": "192.0.2.1",
        "VC_A_WORKER_HOSTS": "192.0.2.2",
    }
    with pytest.raises(TopologyError) as info:
        volcano_tasks.resolve(env, OPTIONS)
    assert str(info.value) == (
        'HOSTNAME="j-a-worker-0" ends in more than one task name (a_worker, worker): '
        "cannot tell its task"
    )


def test_no_host_list_anywhere(tmp_path: Path) -> None:
    env = {"HOSTNAME": "j-master-0", "MALAUNCH_VOLCANO_DIR": str(tmp_path)}
    with pytest.raises(MissingInputError) as info:
        volcano_tasks.resolve(env, OPTIONS)
    assert str(info.value) == (
        f"no VC_<TASK>_HOSTS variable is set and {tmp_path} holds no host file: "
        "is the Volcano job's svc plugin on?"
    )


def test_empty_host_file(tmp_path: Path) -> None:
    (tmp_path / "master.host").write_text("")
    env = {"HOSTNAME": "j-master-0", "VC_TASK_INDEX": "0", "MALAUNCH_VOLCANO_DIR": str(tmp_path)}
    with pytest.raises(TopologyError) as info:
        volcano_tasks.resolve(env, OPTIONS)
    assert str(info.value) == f"{tmp_path / 'master.host'} is empty: expected one host per line"
