"""The slurm source: hostlist and count expansion, SLURM_NODEID, processes per node."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest

from malaunch.errors import TopologyError
from malaunch.models import ResolveOptions, Topology
from malaunch.pipeline import resolve_topology
from malaunch.plugins import load_plugins
from malaunch.testing import read_env_file
from malaunch.topology import slurm
from malaunch.topology.slurm_hostlist import expand_counts, expand_hostlist

FIXTURE = Path(__file__).parents[2] / "fixtures" / "shared" / "slurm_env_example.env"
OPTIONS = ResolveOptions()
FIXTURE_HOSTS = ["node01", "node02", "node03", "node04", "node07"]


def ranks(topo: Topology) -> List[List[int]]:
    return [[d.rank for d in node.devices] for node in topo.nodes]


def fixture_env(**changes: str) -> Dict[str, str]:
    env = read_env_file(FIXTURE)
    env.update(changes)
    return env


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node[01-04,07]", FIXTURE_HOSTS),
        ("gnode[10,20,25,37]", ["gnode10", "gnode20", "gnode25", "gnode37"]),
        ("tux[0-2,12,20-21]", ["tux0", "tux1", "tux2", "tux12", "tux20", "tux21"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),  # width of the lower bound, no padding
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
        ("a[1-2],b3", ["a1", "a2", "b3"]),
        ("a[1-2] b3\tc[7]", ["a1", "a2", "b3", "c7"]),
        ("  x1 , y[2-3]\n", ["x1", "y2", "y3"]),
        ("single", ["single"]),
        ("10.0.0.[1-2]", ["10.0.0.1", "10.0.0.2"]),
    ],
)
def test_expand_hostlist(text: str, hosts: List[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("node[01-04", 'SLURM_JOB_NODELIST="node[01-04": "node[01-04": "[" without a matching "]"'),
        ("node01]", 'SLURM_JOB_NODELIST="node01]": "node01]": "]" without "["'),
        ("n[1-[2]]", 'SLURM_JOB_NODELIST="n[1-[2]]": "n[1-[2]]": "[" without a matching "]"'),
        ("n[4-2]", 'SLURM_JOB_NODELIST="n[4-2]": "[4-2]": range "4-2" goes backwards'),
        ("n[a-b]", 'SLURM_JOB_NODELIST="n[a-b]": "[a-b]": "a-b" is not a number or a range N-M'),
        ("n[]", 'SLURM_JOB_NODELIST="n[]": "[]": "" is not a number or a range N-M'),
        ("a,,b", 'SLURM_JOB_NODELIST="a,,b": item 2 is empty'),
        ("a,", 'SLURM_JOB_NODELIST="a,": item 2 is empty'),
        (" ", 'SLURM_JOB_NODELIST=" ": empty host list'),
        ("n[0-100000]", 'SLURM_JOB_NODELIST="n[0-100000]": "[0-100000]": expands to more than '
         "100000 hosts"),
        ("n[0-60000,0-60000]", 'SLURM_JOB_NODELIST="n[0-60000,0-60000]": "[0-60000,0-60000]": '
         "expands to more than 100000 hosts"),
        ("n[\u0661-\u0662]", 'SLURM_JOB_NODELIST="n[\u0661-\u0662]": "[\u0661-\u0662]": '
         '"\u0661-\u0662" is not a number or a range N-M'),
        ("n[" + "9" * 5000 + "]", 'SLURM_JOB_NODELIST="n[' + "9" * 5000 + ']": "[' + "9" * 5000
         + ']": "' + "9" * 5000 + '" is not a number or a range N-M'),
        # The product of a name's groups is counted before any group is expanded.
        ("n" + "[1-99999]" * 20, 'SLURM_JOB_NODELIST="n' + "[1-99999]" * 20
         + '": expands to more than 100000 hosts'),
        ("a,n[1-50000]x[1-2]", 'SLURM_JOB_NODELIST="a,n[1-50000]x[1-2]": expands to more than '
         "100000 hosts"),
    ],
)  # fmt: skip
def test_malformed_hostlist(text: str, message: str) -> None:
    with pytest.raises(TopologyError) as info:
        expand_hostlist(text, "SLURM_JOB_NODELIST")
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("8(x5)", [8, 8, 8, 8, 8]),
        ("2(x3),1", [2, 2, 2, 1]),
        ("4", [4]),
        ("1,2(x2),3", [1, 2, 2, 3]),
    ],
)
def test_expand_counts(text: str, counts: List[int]) -> None:
    assert expand_counts(text) == counts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("8(5)", 'SLURM_TASKS_PER_NODE="8(5)": "8(5)" is not N or N(xM)'),
        ("x", 'SLURM_TASKS_PER_NODE="x": "x" is not N or N(xM)'),
        ("2,", 'SLURM_TASKS_PER_NODE="2,": "" is not N or N(xM)'),
        ("2(x0)", 'SLURM_TASKS_PER_NODE="2(x0)": "2(x0)": the repeat count must be 1-100000'),
        ("", 'SLURM_TASKS_PER_NODE="": empty count list'),
    ],
)
def test_malformed_counts(text: str, message: str) -> None:
    with pytest.raises(TopologyError) as info:
        expand_counts(text, "SLURM_TASKS_PER_NODE")
    assert str(info.value) == message


def test_fixture_facts_through_the_parsers() -> None:
    env = fixture_env()
    hosts = expand_hostlist(env["SLURM_STEP_NODELIST"])
    assert hosts == FIXTURE_HOSTS
    assert hosts[int(env["SLURM_NODEID"])] == "node03"
    assert expand_counts(env["SLURM_TASKS_PER_NODE"]) == [8] * 5


def test_fixture_resolves_with_localid_0() -> None:
    env = fixture_env(SLURM_LOCALID="0")
    assert slurm.detect(env)
    topo = slurm.resolve(env, OPTIONS)
    assert topo.source == "slurm"
    assert [n.host for n in topo.nodes] == FIXTURE_HOSTS
    assert topo.nnodes == 5
    assert topo.node_rank == 2
    assert topo.this_node.host == "node03"
    assert [len(n.devices) for n in topo.nodes] == [8] * 5
    assert [d.rank for d in topo.this_node.devices] == list(range(16, 24))
    assert ranks(topo)[4] == list(range(32, 40))
    assert topo.master_addr == "node01"
    assert topo.master_port is None
    assert topo.job_id == "123456"


def test_fixture_task_17_is_a_second_launcher_on_the_node() -> None:
    with pytest.raises(TopologyError) as info:
        slurm.resolve(fixture_env(), OPTIONS)
    assert str(info.value) == (
        "SLURM_LOCALID=1: malaunch must run once per node and starts the node's processes "
        "itself; start it with `srun --ntasks-per-node=1 malaunch ...`"
    )


def test_step_list_wins_and_counts_per_node_may_differ() -> None:
    env = {
        "SLURM_JOB_NODELIST": "big[1-9]",
        "SLURM_JOB_NUM_NODES": "9",  # the job is larger than the step: not compared with it
        "SLURM_STEP_NODELIST": "a[1-2],b3",
        "SLURM_STEP_NUM_NODES": "3",
        "SLURM_NODEID": "2",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2),1",
        "SLURM_TASKS_PER_NODE": "9(x9)",
        "SLURM_LOCALID": "0",
    }
    topo = slurm.resolve(env, OPTIONS)
    assert [n.host for n in topo.nodes] == ["a1", "a2", "b3"]
    assert ranks(topo) == [[0, 1], [2, 3], [4]]
    assert topo.node_rank == 2


NO_GPUS = {"SLURM_GPUS_ON_NODE": "0"}
NO_LISTS = {**NO_GPUS, "SLURM_STEP_TASKS_PER_NODE": "", "SLURM_TASKS_PER_NODE": ""}


@pytest.mark.parametrize(
    ("changes", "per_node"),
    [
        ({}, 8),  # SLURM_GPUS_ON_NODE
        (NO_GPUS, 8),  # then SLURM_STEP_TASKS_PER_NODE
        ({**NO_GPUS, "SLURM_STEP_TASKS_PER_NODE": "", "SLURM_TASKS_PER_NODE": "3(x5)"}, 3),
        ({**NO_LISTS, "SLURM_NTASKS_PER_NODE": "4"}, 4),
        ({**NO_LISTS, "SLURM_NTASKS_PER_NODE": ""}, 1),
    ],
)
def test_processes_per_node_order(changes: Dict[str, str], per_node: int) -> None:
    topo = slurm.resolve(fixture_env(SLURM_LOCALID="0", **changes), OPTIONS)
    assert [len(n.devices) for n in topo.nodes] == [per_node] * 5
    assert topo.this_node.devices[0].rank == 2 * per_node


def test_nproc_option_wins_and_visible_devices_give_ids() -> None:
    env = fixture_env(SLURM_LOCALID="0", CUDA_VISIBLE_DEVICES="4,5,6,7")
    topo = slurm.resolve(env, ResolveOptions(nproc_per_node=2))
    assert ranks(topo) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert [d.device_id for d in topo.this_node.devices] == [4, 5]
    assert [d.device_id for d in topo.nodes[0].devices] == [0, 1]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"SLURM_NODEID": "5"}, "SLURM_NODEID=5 is out of range for SLURM_STEP_NODELIST (5 hosts)"),
        ({"SLURM_STEP_NUM_NODES": "4"},
         "SLURM_STEP_NUM_NODES=4 does not match SLURM_STEP_NODELIST, which lists 5 hosts"),
        ({"SLURM_STEP_NODELIST": "", "SLURM_NNODES": "6"},
         "SLURM_NNODES=6 does not match SLURM_JOB_NODELIST, which lists 5 hosts"),
        ({"SLURM_STEP_NODELIST": "node[01-04"},
         'SLURM_STEP_NODELIST="node[01-04": "node[01-04": "[" without a matching "]"'),
        ({"SLURM_GPUS_ON_NODE": "0", "SLURM_STEP_TASKS_PER_NODE": "8(x4)"},
         'SLURM_STEP_TASKS_PER_NODE="8(x4)" gives 4 nodes, the node list has 5'),
        ({"CUDA_VISIBLE_DEVICES": "0,1"},
         "SLURM_GPUS_ON_NODE asks for 8 processes per node but CUDA_VISIBLE_DEVICES lists 2"),
        ({"SLURM_NODEID": "x"}, 'SLURM_NODEID="x": expected a non-negative integer'),
        # Node names are host names: nothing a shell or a log line could misread.
        ({"SLURM_STEP_NODELIST": "$(id),node[02-05]"},
         "SLURM_STEP_NODELIST=\"$(id),node[02-05]\": '$(id)' is not a host name or address"),
        ({"SLURM_STEP_NODELIST": "n;id[1-5]"},
         "SLURM_STEP_NODELIST=\"n;id[1-5]\": 'n;id1' is not a host name or address"),
        ({"SLURM_STEP_NODELIST": "a\x01[1-5]"},
         "SLURM_STEP_NODELIST=\"a\x01[1-5]\": 'a\\x011' is not a host name or address"),
    ],
)  # fmt: skip
def test_errors(changes: Dict[str, str], message: str) -> None:
    with pytest.raises(TopologyError) as info:
        slurm.resolve(fixture_env(SLURM_LOCALID="0", **changes), OPTIONS)
    assert str(info.value) == message


def test_detect() -> None:
    assert slurm.detect({"SLURM_JOB_NODELIST": "n1", "SLURM_NODEID": "0"})
    assert slurm.detect({"SLURM_NODELIST": "n1", "SLURM_NODEID": "0"})
    # sbatch's batch script on the first node has no SLURM_NODEID per step
    assert not slurm.detect({"SLURM_JOB_NODELIST": "n[1-2]"})
    assert not slurm.detect({"SLURM_NODEID": "0"})


def test_auto_picks_slurm_after_volcano(tmp_path: Path) -> None:
    plugins = load_plugins({"MALAUNCH_DISABLE_PLUGINS": "mindspore,tensorflow_ps,torch_ddp"})
    order = [s.name for s in plugins.auto_sources()]
    assert order.index("volcano") < order.index("slurm") < order.index("local")
    assert plugins.sources["slurm"].item.auto_order == 45
    env = fixture_env(SLURM_LOCALID="0", MALAUNCH_VOLCANO_DIR=str(tmp_path))
    topo = resolve_topology(plugins, env, "auto", ResolveOptions(wait_timeout=0))
    assert topo.source == "slurm"
