"""Never silently alone: the refusals of ``--topology auto`` (malaunch.topology.signs)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from malaunch.errors import ExitCode, TopologyError
from malaunch.models import ResolveOptions, Topology
from malaunch.pipeline import resolve_topology
from malaunch.plugins import PluginSet, load_plugins
from malaunch.testing import read_env_file
from malaunch.topology import signs

SHARED = Path(__file__).parents[2] / "fixtures" / "shared"
LOADER_ENV = {"MALAUNCH_DISABLE_PLUGINS": "mindspore,tensorflow_ps,torch_ddp"}


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
    ],
)  # fmt: skip
def test_signs_of_a_distributed_job(env: Dict[str, str], expected: List[str]) -> None:
    assert shown(env) == expected


def test_long_values_are_cut() -> None:
    value = "x" * 50
    assert shown({"PET_RDZV_CONF": value}) == [f"PET_RDZV_CONF={'x' * 40}..."]


def test_refusal_names_what_it_saw_and_the_source_that_reads_it() -> None:
    env = read_env_file(SHARED / "torchrun_worker_env.env")  # minus torchrun's own markers:
    env = {k: v for k, v in env.items() if k not in ("TORCHELASTIC_RUN_ID", "GROUP_RANK")}
    with pytest.raises(TopologyError) as info:
        signs.refuse_alone(env, no_names)
    assert info.value.exit_code == ExitCode.DATA_ERROR
    assert str(info.value) == (
        "no topology source matched, but this environment shows a distributed job "
        "(WORLD_SIZE=16, RANK=11, MASTER_ADDR=192.0.2.21): name its source with "
        "--topology kubeflow, or run alone on purpose with --topology local"
    )


def test_refusal_without_a_source_to_name() -> None:
    with pytest.raises(TopologyError) as info:
        signs.refuse_alone({"OMPI_COMM_WORLD_SIZE": "4"}, no_names)
    assert str(info.value) == (
        "no topology source matched, but this environment shows a distributed job "
        "(OMPI_COMM_WORLD_SIZE=4): no built-in source reads these; name a plugin's source "
        "with --topology, or run alone on purpose with --topology local"
    )


def test_refusal_lists_six_signs_at_most() -> None:
    env = {f"PET_V{i}": "1" for i in range(8)}
    with pytest.raises(TopologyError, match=r"PET_V5=1, \.\.\. \(2 more\)\)"):
        signs.refuse_alone(env, no_names)


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
            "torchrun worker that already has its rank; run the command itself there, or start "
            "a separate job on purpose with --topology local",
        ),
    ],
)
def test_nested_launch(env: Dict[str, str], message: str) -> None:
    with pytest.raises(TopologyError) as info:
        signs.check_not_nested(env)
    assert str(info.value) == message


def test_is_local() -> None:
    assert signs.is_local("[::1]", no_names)
    assert signs.is_local("0.0.0.0", no_names)
    assert not signs.is_local("192.0.2.1", no_names)
    assert signs.is_local("LOCALHOST", lambda: ())


# --- through the pipeline --------------------------------------------------------------------


def test_auto_refuses_to_fall_back_to_local(plugins: PluginSet) -> None:
    with pytest.raises(TopologyError, match=r"\(WORLD_SIZE=4\): name its source with"):
        auto(plugins, {"WORLD_SIZE": "4"})


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
