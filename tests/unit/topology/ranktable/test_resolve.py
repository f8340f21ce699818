"""resolve(): where the table is, which node this is, and the Topology built from it."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import pytest

from malaunch.errors import MissingInputError, NotReadyError, TopologyError
from malaunch.models import ResolveOptions, Topology
from malaunch.testing import read_env_file
from malaunch.topology.ranktable import source
from malaunch.topology.ranktable.formats import parse_table
from malaunch.topology.ranktable.identity import find_this_node, host_addresses, normalise
from malaunch.topology.ranktable.source import _load_now

FIXTURES = Path(__file__).parents[3] / "fixtures"
SHARED = FIXTURES / "shared"
OWN = FIXTURES / "rank_tables"
JOB = "modelarts-job-3f1e0d2c-0000-4000-8000-000000000042"
MA_JOB = "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001"


def options(tmp_path: Path, hostnames: Optional[Tuple[str, ...]] = ()) -> ResolveOptions:
    # hostnames=() keeps the tests independent of this machine's names and addresses.
    return ResolveOptions(
        wait_timeout=0, poll_interval=0.01, log_dir=str(tmp_path / "logs"), hostnames=hostnames
    )


def devices(topo: Topology, node: int) -> List[Tuple[int, int, int]]:
    """(rank, device_id, local_index) of one node's devices."""
    return [(d.rank, d.device_id, d.local_index) for d in topo.nodes[node].devices]


@pytest.fixture(autouse=True)
def _no_default_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never let this machine's /user/config/jobstart_hccl.json take part."""
    monkeypatch.setattr(source, "DEFAULT_PATH", tmp_path / "absent" / "jobstart_hccl.json")


def test_modelarts_template2_directory(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    shutil.copy(SHARED / "ranktable_template2_2pods_8dev.json", config / "jobstart_hccl.json")
    env = read_env_file(SHARED / "modelarts_ascend_env_example.env")
    env["RANK_TABLE_FILE"] = str(config)
    env["MA_MOUNT_PATH"] = str(tmp_path / "mount")
    assert source.detect(env)
    topo = source.resolve(env, options(tmp_path))
    written = tmp_path / "mount" / "rank_table" / "jobstart_hccl.json"
    assert topo.source == "ranktable"
    assert topo.rank_table_file == str(written)
    assert json.loads(written.read_text())["server_list"][0]["server_id"] == "192.0.2.21"
    assert [(n.index, n.host, n.name) for n in topo.nodes] == [
        (0, "192.0.2.21", f"{MA_JOB}-worker-0"),
        (1, "192.0.2.22", f"{MA_JOB}-worker-1"),
    ]
    assert topo.node_rank == 0
    assert topo.master_addr == "192.0.2.21"
    assert topo.master_port is None
    assert topo.job_id == MA_JOB
    assert topo.world_size == 16
    assert devices(topo, 1) == [(8 + i, i, i) for i in range(8)]
    assert topo.nodes[1].devices[0].device_ip == "198.51.100.121"


def test_converted_table_goes_to_the_log_dir_without_ma_mount_path(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    shutil.copy(SHARED / "ranktable_template2_2pods_8dev.json", config / "hccl.json")
    env = {"RANK_TABLE_FILE": str(config), "MA_CURRENT_INSTANCE_NAME": f"{MA_JOB}-worker-1"}
    topo = source.resolve(env, options(tmp_path))
    written = tmp_path / "logs" / "rank_table" / "jobstart_hccl.json"
    assert topo.rank_table_file == str(written)
    assert written.exists()
    assert topo.node_rank == 1


def test_template1_file_is_passed_on_as_is(tmp_path: Path) -> None:
    path = SHARED / "ranktable_v1_0_2nodes_8dev.json"
    env = {"RANK_TABLE_FILE": str(path), "MA_CURRENT_HOST_IP": "192.0.2.12"}
    topo = source.resolve(env, options(tmp_path))
    assert topo.rank_table_file == str(path.absolute())
    assert topo.node_rank == 1
    assert topo.master_addr == "192.0.2.11"
    assert [n.name for n in topo.nodes] == [None, None]
    assert not (tmp_path / "logs").exists()  # nothing written for template-1 input


def test_v1_0_variable_wins_over_rank_table_file(tmp_path: Path) -> None:
    env = {
        "RANK_TABLE_FILE_V_1_0": str(OWN / "v1_0_devices_4_7.json"),
        "RANK_TABLE_FILE": str(SHARED / "ranktable_v1_0_2nodes_8dev.json"),
    }
    topo = source.resolve(env, options(tmp_path))
    assert [n.host for n in topo.nodes] == ["192.0.2.41"]


def test_physical_device_ids_get_in_container_indexes(tmp_path: Path) -> None:
    env = {"RANK_TABLE_FILE": str(OWN / "v1_0_devices_4_7.json")}
    topo = source.resolve(env, options(tmp_path))
    assert topo.node_rank == 0  # the only server
    assert devices(topo, 0) == [(0, 4, 0), (1, 5, 1), (2, 6, 2), (3, 7, 3)]


def test_pod_on_a_shared_node_with_devices_listed_out_of_order(tmp_path: Path) -> None:
    env = {
        "RANK_TABLE_FILE": str(OWN / "template2_shared_server.json"),
        "MA_CURRENT_INSTANCE_NAME": f"{JOB}-worker-1",
        "MA_CURRENT_HOST_IP": "192.0.2.31",
    }
    topo = source.resolve(env, options(tmp_path))
    assert topo.node_rank == 1
    assert [n.host for n in topo.nodes] == ["192.0.2.31", "192.0.2.31"]
    # Ranks follow the list order (5, 4, 7, 6); local indexes the ascending physical ids.
    assert devices(topo, 1) == [(4, 5, 1), (5, 4, 0), (6, 7, 3), (7, 6, 2)]


def test_hostname_is_the_pod_name_when_ma_current_instance_name_is_unset(tmp_path: Path) -> None:
    env = {
        "RANK_TABLE_FILE": str(OWN / "template2_order_trap.json"),
        "HOSTNAME": f"{JOB}-worker-10",
    }
    topo = source.resolve(env, options(tmp_path))
    assert topo.node_rank == 2
    assert topo.this_node.host == "192.0.2.100"


def test_ambiguous_node_address_without_pod_name(tmp_path: Path) -> None:
    path = OWN / "template2_shared_server.json"
    env = {"RANK_TABLE_FILE": str(path), "MA_CURRENT_HOST_IP": "192.0.2.31"}
    with pytest.raises(TopologyError) as info:
        source.resolve(env, options(tmp_path))
    assert str(info.value) == (
        f"rank table {path}: this node's addresses 192.0.2.31 (MA_CURRENT_HOST_IP) match several "
        f"servers: {JOB}-worker-0 on 192.0.2.31, {JOB}-worker-1 on 192.0.2.31; "
        "set MA_CURRENT_INSTANCE_NAME to this pod's name"
    )


def test_unknown_pod_name_lists_the_pods(tmp_path: Path) -> None:
    path = OWN / "template2_multigroup_cpu_ps.json"
    env = {"RANK_TABLE_FILE": str(path), "MA_CURRENT_INSTANCE_NAME": f"{JOB}-ps-0"}
    with pytest.raises(TopologyError) as info:
        source.resolve(env, options(tmp_path))
    assert str(info.value) == (
        f"rank table {path}: no pod_name is '{JOB}-ps-0' (MA_CURRENT_INSTANCE_NAME); pods: "
        f"{JOB}-worker-0, {JOB}-worker-1, {JOB}-evaluator-0"
    )


def test_no_matching_server_lists_what_was_compared(tmp_path: Path) -> None:
    path = SHARED / "ranktable_v1_0_2nodes_8dev.json"
    env = {"RANK_TABLE_FILE": str(path), "MA_CURRENT_HOST_IP": "192.0.2.99"}
    with pytest.raises(TopologyError) as info:
        source.resolve(env, options(tmp_path, hostnames=("trainer-7", "203.0.113.7")))
    assert str(info.value) == (
        f"rank table {path}: cannot tell which server is this node: compared addresses "
        "192.0.2.99 (MA_CURRENT_HOST_IP), trainer-7 (this host), 203.0.113.7 (this host) "
        "with server_id/host_ip/container_ip of the servers: 192.0.2.11, 192.0.2.12"
    )


def test_ipv6_server_ids_match_by_value(tmp_path: Path) -> None:
    env = {"RANK_TABLE_FILE": str(OWN / "v1_0_ipv6.json"), "XDL_IP": "2001:DB8:0::12"}
    topo = source.resolve(env, options(tmp_path))
    assert topo.node_rank == 1
    assert topo.master_addr == "2001:db8::11"
    assert topo.this_node.devices[0].device_ip == "2001:db8:100::3"
    assert normalise("[2001:DB8::0:1]") == normalise("2001:db8::1")


def test_ascend_operator_table_uses_pod_ips(tmp_path: Path) -> None:
    """server_id is a pod UID there: peers reach the pod at container_ip."""
    env = {"RANK_TABLE_FILE": str(OWN / "v1_0_ascend_operator.json")}
    topo = source.resolve(env, options(tmp_path, hostnames=("pod-b", "203.0.113.52")))
    assert [n.host for n in topo.nodes] == ["203.0.113.51", "203.0.113.52"]
    assert topo.master_addr == "203.0.113.51"
    assert topo.node_rank == 1
    # Listed (device 1 rank 3, device 0 rank 2): devices come in rank order.
    assert devices(topo, 1) == [(2, 0, 0), (3, 1, 1)]


def test_node_address_from_the_environment_is_preferred_to_host_lookup() -> None:
    table = _load_now(SHARED / "ranktable_v1_0_2nodes_8dev.json")

    def lookup() -> Tuple[str, ...]:
        raise AssertionError("this host's addresses must not be looked up")

    assert find_this_node(table, {"XDL_IP": "192.0.2.12"}, None, lookup) == 1
    assert find_this_node(table, {}, None, lambda: ("node-a", "192.0.2.11")) == 0


def test_host_address_narrows_an_ambiguous_node_address() -> None:
    table = _load_now(OWN / "v1_0_ascend_operator.json")
    raw_env = {"MA_CURRENT_HOST_IP": "192.0.2.51"}
    assert find_this_node(table, raw_env, ("203.0.113.51",)) == 0


# --- where the table is -------------------------------------------------------------------


def test_detect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not source.detect({})
    assert not source.detect({"RANK_TABLE_FILE": ""})
    assert source.detect({"RANK_TABLE_FILE": "/user/config"})
    assert source.detect({"RANK_TABLE_FILE_V_1_0": "/x/hccl.json"})
    default = tmp_path / "jobstart_hccl.json"
    monkeypatch.setattr(source, "DEFAULT_PATH", default)
    assert not source.detect({})
    shutil.copy(SHARED / "ranktable_template2_2pods_8dev.json", default)
    assert source.detect({})
    topo = source.resolve({"MA_CURRENT_INSTANCE_NAME": f"{MA_JOB}-worker-1"}, options(tmp_path))
    assert topo.node_rank == 1


def test_nothing_to_read(tmp_path: Path) -> None:
    with pytest.raises(MissingInputError) as info:
        source.resolve({}, options(tmp_path))
    assert str(info.value) == (
        "no rank table: RANK_TABLE_FILE_V_1_0 and RANK_TABLE_FILE are not set and "
        f"{source.DEFAULT_PATH} does not exist"
    )


def test_v1_0_variable_naming_a_directory(tmp_path: Path) -> None:
    with pytest.raises(TopologyError) as info:
        source.resolve({"RANK_TABLE_FILE_V_1_0": str(tmp_path)}, options(tmp_path))
    assert str(info.value) == (
        f"RANK_TABLE_FILE_V_1_0={tmp_path}: is a directory; expected a template-1 rank table file"
    )


def test_v1_0_file_that_never_appears(tmp_path: Path) -> None:
    path = tmp_path / "late" / "hccl_v1.json"
    with pytest.raises(NotReadyError) as info:
        source.resolve({"RANK_TABLE_FILE_V_1_0": str(path)}, options(tmp_path))
    assert str(info.value) == (
        f"rank table {path} (from RANK_TABLE_FILE_V_1_0) not ready after 0s: "
        "the file does not exist (see --wait-timeout)"
    )


def test_directory_without_the_file(tmp_path: Path) -> None:
    with pytest.raises(NotReadyError) as info:
        source.resolve({"RANK_TABLE_FILE": str(tmp_path)}, options(tmp_path))
    assert str(info.value) == (
        f"rank table {tmp_path} (from RANK_TABLE_FILE) not ready after 0s: "
        "no jobstart_hccl.json or hccl.json in this directory yet (see --wait-timeout)"
    )


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.mkdir(), "it is a directory, not a rank table file"),
        (lambda p: p.write_text('{"status": "initializing"}'), 'status is "initializing"'),
    ],
)
def test_a_file_of_the_directory_that_is_not_ready_is_named(
    tmp_path: Path, make: Callable[[Path], object], reason: str
) -> None:
    """The reason is the file's: it named the folder, which may well be one."""
    make(tmp_path / "jobstart_hccl.json")
    with pytest.raises(NotReadyError) as info:
        source.resolve({"RANK_TABLE_FILE": str(tmp_path)}, options(tmp_path))
    assert str(info.value) == (
        f"rank table {tmp_path} (from RANK_TABLE_FILE) not ready after 0s: "
        f"its jobstart_hccl.json: {reason} (see --wait-timeout)"
    )


def test_unmatched_hostname_falls_back_to_addresses_and_is_reported(tmp_path: Path) -> None:
    path = OWN / "template2_order_trap.json"
    env = {"RANK_TABLE_FILE": str(path), "HOSTNAME": "laptop", "MA_CURRENT_HOST_IP": "192.0.2.99"}
    with pytest.raises(TopologyError) as info:
        source.resolve(env, options(tmp_path))
    assert str(info.value) == (
        f"rank table {path}: cannot tell which server is this node: pod name 'laptop' (HOSTNAME) "
        "matched no pod_name; compared addresses 192.0.2.99 (MA_CURRENT_HOST_IP) with "
        "server_id/host_ip/container_ip of the servers: 192.0.2.9, 192.0.2.10, 192.0.2.100"
    )
    env["MA_CURRENT_HOST_IP"] = "192.0.2.10"
    assert source.resolve(env, options(tmp_path)).node_rank == 1


def test_this_hosts_own_name_is_looked_up_when_needed() -> None:
    raw = json.loads((SHARED / "ranktable_v1_0_2nodes_8dev.json").read_text())
    raw["server_list"][1]["server_id"] = socket.gethostname()
    table = parse_table(raw, "rank table t")
    assert socket.gethostname() in host_addresses()
    assert find_this_node(table, {}, None) == 1
