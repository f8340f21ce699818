"""``--topology auto``: the built-in sources, their order, and which one wins where."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest

from malaunch.errors import TopologyError
from malaunch.hookspecs import hookimpl
from malaunch.models import Node, ResolveOptions, Topology, TopologySource
from malaunch.pipeline import resolve_topology
from malaunch.plugins import Origin, PluginSet, load_plugins
from malaunch.testing import read_env_file

FIXTURES = Path(__file__).parents[2] / "fixtures"
SHARED = FIXTURES / "shared"
BUILTIN_ORDER = [
    "ranktable", "tf-ps", "tf-config", "kubeflow", "mindx", "mindx-pytorch", "mindx-tensorflow",
    "volcano-tasks", "volcano", "slurm", "local",
]  # fmt: skip
# Topology tests need no framework; leaving them out keeps these tests about sources only.
LOADER_ENV = {"MALAUNCH_DISABLE_PLUGINS": "mindspore,tensorflow_ps,torch_ddp"}


@pytest.fixture(scope="module")
def plugins() -> PluginSet:
    return load_plugins(LOADER_ENV)


@pytest.fixture
def no_etc(tmp_path: Path) -> Dict[str, str]:
    """Keep this machine's /etc/volcano (if any) out of the picture."""
    return {"MALAUNCH_VOLCANO_DIR": str(tmp_path)}


def auto(plugins: PluginSet, env: Dict[str, str]) -> Topology:
    return resolve_topology(plugins, env, "auto", ResolveOptions(wait_timeout=0))


def test_builtin_sources_are_registered_in_auto_order(plugins: PluginSet) -> None:
    builtin = [s for s in plugins.auto_sources() if s.name in BUILTIN_ORDER]
    assert [s.name for s in builtin] == BUILTIN_ORDER
    assert [s.auto_order for s in builtin] == [10, 20, 30, 32, 35, 36, 37, 38, 40, 45, 1000]
    for name in BUILTIN_ORDER:
        registered = plugins.sources[name]
        assert registered.origin.distribution == "malaunch"
        assert registered.item.help and "\n" not in registered.item.help


def tf_ps_env(no_etc: Dict[str, str]) -> Dict[str, str]:
    """TF_PS_HOSTS, TF_CONFIG and VC_WORKER_HOSTS all present (Volcano TF job)."""
    return {**read_env_file(SHARED / "tf_ps_env_2ps_3workers.env"), **no_etc}


def test_rank_table_wins_over_everything(plugins: PluginSet, no_etc: Dict[str, str]) -> None:
    env = tf_ps_env(no_etc)
    env["RANK_TABLE_FILE_V_1_0"] = str(SHARED / "ranktable_v1_0_2nodes_8dev.json")
    env["MA_CURRENT_HOST_IP"] = "192.0.2.12"
    assert auto(plugins, env).source == "ranktable"


@pytest.mark.parametrize(
    ("removed", "expected"),
    [
        ([], "tf-ps"),
        (["TF_PS_HOSTS"], "tf-config"),
        (["TF_WORKER_HOSTS"], "tf-config"),
        (["TF_PS_HOSTS", "TF_CONFIG"], "volcano-tasks"),
        (["TF_PS_HOSTS", "TF_CONFIG", "VC_PS_HOSTS"], "volcano"),
    ],
)
def test_precedence_as_variables_disappear(
    plugins: PluginSet, no_etc: Dict[str, str], removed: List[str], expected: str
) -> None:
    env = {k: v for k, v in tf_ps_env(no_etc).items() if k not in removed}
    topo = auto(plugins, env)
    assert topo.source == expected
    if expected == "volcano-tasks":
        # every pod of both tasks, worker before ps: this worker-1 is node 1 of 5
        assert topo.node_rank == 1
        assert [node.role for node in topo.nodes] == ["worker"] * 3 + ["ps"] * 2
    if expected == "volcano":
        # the volcano source reads the same pod as node 1 of the worker list
        assert topo.node_rank == 1
        assert topo.nnodes == 3


def test_without_any_host_list_the_counts_still_refuse_local(
    plugins: PluginSet, no_etc: Dict[str, str]
) -> None:
    removed = ("TF_PS_HOSTS", "TF_CONFIG", "VC_PS_HOSTS", "VC_WORKER_HOSTS")
    env = {k: v for k, v in tf_ps_env(no_etc).items() if k not in removed}
    with pytest.raises(TopologyError) as info:
        auto(plugins, env)
    assert str(info.value) == (
        "no topology source matched, but this environment shows a distributed job "
        "(VC_PS_NUM=2, VC_WORKER_NUM=3): name its source with --topology volcano-tasks or "
        "--topology volcano, or run alone on purpose with --topology local"
    )


def test_modelarts_without_rank_table_is_volcano(
    plugins: PluginSet, no_etc: Dict[str, str]
) -> None:
    env = read_env_file(SHARED / "modelarts_ascend_env_example.env")
    del env["RANK_TABLE_FILE"]
    topo = auto(plugins, {**env, **no_etc})
    assert topo.source == "volcano"
    assert topo.world_size == 16


def test_octopus_is_volcano(plugins: PluginSet, no_etc: Dict[str, str]) -> None:
    env = read_env_file(SHARED / "octopus_env_example.env")
    topo = auto(plugins, {**env, **no_etc})
    assert topo.source == "volcano"
    assert topo.master_port == 6060
    assert len(topo.data.dataset_map) == 3


def test_mounted_host_file_is_volcano(plugins: PluginSet) -> None:
    env = read_env_file(FIXTURES / "env" / "volcano_hosts_file_only.env")
    env["MALAUNCH_VOLCANO_DIR"] = str(SHARED / "etc_volcano_3workers")
    assert auto(plugins, env).source == "volcano"


def test_named_source_ignores_auto_order(plugins: PluginSet, no_etc: Dict[str, str]) -> None:
    env = tf_ps_env(no_etc)
    options = ResolveOptions(nproc_per_node=2)
    assert resolve_topology(plugins, env, "local", options).source == "local"
    assert resolve_topology(plugins, env, "volcano", options).source == "volcano"
    assert resolve_topology(plugins, env, "tf-config", options).source == "tf-config"


class ThirdParty:
    """A third-party source that slots in between tf-ps and tf-config."""

    @hookimpl
    def malaunch_register_topology_sources(self) -> List[TopologySource]:
        def resolve(env: object, options: ResolveOptions) -> Topology:
            node = Node(index=0, host="192.0.2.99")
            return Topology(source="third", nodes=(node,), node_rank=0, master_addr=node.host)

        return [
            TopologySource(
                name="third",
                resolve=resolve,
                detect=lambda env: "THIRD" in env,
                auto_order=25,
                help="test source",
            )
        ]


def test_third_party_source_takes_part_in_auto(no_etc: Dict[str, str]) -> None:
    origin = Origin("third", "third-dist", "1.0")
    plugins = load_plugins(LOADER_ENV, extra=[(ThirdParty(), origin)])
    env = {**tf_ps_env(no_etc), "THIRD": "1"}
    assert auto(plugins, env).source == "tf-ps"
    del env["TF_PS_HOSTS"]
    assert auto(plugins, env).source == "third"
    del env["THIRD"]
    assert auto(plugins, env).source == "tf-config"
