"""Rank-table parsing and validation on fixture files (template 1 v1.0 / v1.2, template 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Tuple, Type

import pytest

from malaunch.errors import MalaunchError, MissingInputError, NotReadyError, TopologyError
from malaunch.topology.ranktable.formats import parse_table
from malaunch.topology.ranktable.read import NotReady, Ready, read_once
from malaunch.topology.ranktable.schema import Table
from malaunch.topology.ranktable.source import _load_now, describe_file
from malaunch.wording import spans

FIXTURES = Path(__file__).parents[3] / "fixtures"
SHARED = FIXTURES / "shared"
OWN = FIXTURES / "rank_tables"


def load(path: Path) -> Table:
    return _load_now(path)


def layout(table: Table) -> List[Tuple[str, List[int], List[int]]]:
    """(server_id, ranks, device ids) per server, in the table's rank order."""
    return [
        (s.server_id, [e.rank for e in s.devices], [e.device_id for e in s.devices])
        for s in table.servers
    ]


# --- the shared fixtures, as their README describes them ------------------------------------


def test_shared_v1_0_two_nodes() -> None:
    path = SHARED / "ranktable_v1_0_2nodes_8dev.json"
    table = load(path)
    assert (table.layout, table.version) == ("template 1", "1.0")
    assert layout(table) == [
        ("192.0.2.11", list(range(8)), list(range(8))),
        ("192.0.2.12", list(range(8, 16)), list(range(8))),
    ]
    assert table.rank_count == 16
    raw = json.loads(path.read_text())
    numbers = [
        d[k] for s in raw["server_list"] for d in s["device"] for k in ("device_id", "rank_id")
    ]
    assert all(isinstance(n, str) for n in numbers)


def test_shared_duplicate_device_id_is_rejected() -> None:
    path = SHARED / "invalid_ranktable_v1_0_duplicate_device_id.json"
    with pytest.raises(TopologyError) as info:
        load(path)
    assert str(info.value) == (
        f'rank table {path}: server_list[1].device[3].device_id: duplicate device id "2" '
        "in server 192.0.2.12 (also server_list[1].device[2])"
    )


def test_shared_template2_two_pods_in_pod_index_order() -> None:
    table = load(SHARED / "ranktable_template2_2pods_8dev.json")
    assert table.layout == "template 2"
    job = "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001"
    assert [s.pod_name for s in table.servers] == [f"{job}-worker-0", f"{job}-worker-1"]
    assert layout(table) == [
        ("192.0.2.21", list(range(8)), list(range(8))),
        ("192.0.2.22", list(range(8, 16)), list(range(8))),
    ]


@pytest.mark.parametrize(
    "name", ["ranktable_template2_initializing.json", "ranktable_initial_configmap.json"]
)
def test_shared_initializing_tables_are_not_ready(name: str) -> None:
    found = read_once(SHARED / name)
    assert found == NotReady("status", 'status is "initializing"')
    with pytest.raises(NotReadyError) as info:
        load(SHARED / name)
    assert str(info.value) == (
        f'rank table {SHARED / name}: not ready: status is "initializing"; '
        'a launch would wait until it is "completed"'
    )


# --- valid tables of our own ----------------------------------------------------------------


def test_v1_2_superpod() -> None:
    table = load(OWN / "v1_2_superpod.json")
    assert (table.layout, table.version) == ("template 1", "1.2")
    assert [s.server_id for s in table.servers] == [f"192.0.2.6{n}" for n in range(4)]
    assert table.details == (
        "super pod 0: servers 192.0.2.60, 192.0.2.61",
        "super pod 1: servers 192.0.2.62, 192.0.2.63",
    )
    assert [s.host_ip for s in table.servers] == [f"192.0.2.6{n}" for n in range(4)]


def test_v1_2_without_super_pod_list_is_accepted() -> None:
    raw = json.loads((OWN / "v1_2_superpod.json").read_text())
    del raw["super_pod_list"]
    table = parse_table(raw, "rank table t")
    assert table.details == ("super pods: none listed (super_pod_list is optional)",)


def test_merge_hccl_integer_rank_ids() -> None:
    table = load(OWN / "v1_0_merged_int_rankid.json")
    assert layout(table) == [
        ("192.0.2.11", [0, 1, 2, 3], [0, 1, 2, 3]),
        ("192.0.2.12", [4, 5, 6, 7], [0, 1, 2, 3]),
    ]


def test_ipv6_addresses() -> None:
    table = load(OWN / "v1_0_ipv6.json")
    assert [s.server_id for s in table.servers] == ["2001:db8::11", "2001:db8::12"]
    assert [e.device_ip for e in table.servers[1].devices] == ["2001:db8:100::3", "2001:db8:100::4"]


def test_servers_are_ordered_by_rank_not_by_list_position() -> None:
    table = load(OWN / "v1_0_ascend_operator.json")
    uid = "0d3c5a9e-0000-4000-8000-00000000000"
    assert layout(table) == [(f"{uid}1", [1, 0], [1, 0]), (f"{uid}2", [3, 2], [1, 0])]
    assert table.servers[0].container_ip == "203.0.113.51"


def test_missing_version_means_1_0_and_unknown_keys_are_ignored() -> None:
    raw = json.loads((SHARED / "ranktable_v1_0_2nodes_8dev.json").read_text())
    del raw["version"]
    raw["server_list"][0]["hardware_type"] = "800I-A2-32G"
    raw["server_list"][0]["device"][0]["dpu_ip"] = "203.0.113.1"
    assert parse_table(raw, "rank table t").version == "1.0"


def test_spans() -> None:
    assert spans([3, 0, 1, 2, 7, 5, 6]) == "0-3,5-7"
    assert spans([4]) == "4"
    assert spans([0, 2, 4]) == "0,2,4"


def test_describe_file_summary() -> None:
    path = OWN / "v1_0_devices_4_7.json"
    assert describe_file(path) == (
        f"rank table {path}: template 1 version 1.0, status completed\n"
        "1 server, 4 ranks\n"
        "server 192.0.2.41: ranks 0-3, device ids 4-7"
    )


# --- broken tables: the exact message ---------------------------------------------------------

SUPPORTED = "supported: 1.0, 1.2, template 2"
BROKEN: List[Tuple[str, Type[MalaunchError], str]] = [
    ("empty.json", TopologyError, "the file is empty"),
    (
        "truncated.json",
        TopologyError,
        "not valid JSON: Unterminated string starting at: line 20 column 29 (char 668)",
    ),
    ("does_not_exist.json", MissingInputError, "the file does not exist"),
    (
        "v1_1_heterogeneous.json",
        TopologyError,
        'unsupported rank table version "1.1" (the heterogeneous CPU+NPU layout with node_list; '
        f"{SUPPORTED})",
    ),
    (
        "v2_0_a5.json",
        TopologyError,
        f'unsupported rank table version "2.0" (the Atlas A5 layout with rank_list; {SUPPORTED})',
    ),
    ("v9_9_unknown.json", TopologyError, f'unsupported rank table version "9.9" ({SUPPORTED})'),
    (
        "global_ranktable.json",
        TopologyError,
        "unsupported rank table format: a ClusterD global rank table (server_group_list) is not "
        f"a launch input ({SUPPORTED})",
    ),
    (
        "invalid_v1_0_duplicate_device_ip.json",
        TopologyError,
        'server_list[1].device[0].device_ip: duplicate device ip "198.51.100.1" '
        "(also server_list[0].device[0].device_ip)",
    ),
    (
        "invalid_v1_0_duplicate_server_id.json",
        TopologyError,
        'server_list[1].server_id: duplicate server id "192.0.2.11" (also server_list[0])',
    ),
    (
        "invalid_v1_0_rank_gap.json",
        TopologyError,
        'server_list[1].device[1].rank_id: rank id "4" is out of range: 4 devices are listed, '
        "so rank ids must be 0..3 without gaps",
    ),
    (
        "invalid_v1_0_duplicate_rank_id.json",
        TopologyError,
        'server_list[1].device[0].rank_id: duplicate rank id "1" (also server_list[0].device[1])',
    ),
    (
        "invalid_v1_0_server_count_mismatch.json",
        TopologyError,
        'server_count: "3" does not match the 2 servers listed',
    ),
    (
        "invalid_v1_0_non_digit_device_id.json",
        TopologyError,
        'server_list[0].device[1].device_id: expected a non-negative integer such as "0", '
        'got "one"',
    ),
    (
        "invalid_v1_0_host_ip_mixed.json",
        TopologyError,
        'server_list[1].host_ip: missing, but server_list[0] has host_ip "192.0.2.11" '
        "(HCCL needs host_ip on every server or on none)",
    ),
    ("invalid_v1_0_empty_device_list.json", TopologyError, "server_list[1].device: is empty"),
    (
        "invalid_v1_2_duplicate_super_device_id.json",
        TopologyError,
        'server_list[1].device[1].super_device_id: duplicate super device id "37748736" in '
        "super pod 0 (also server_list[0].device[0].super_device_id)",
    ),
    (
        "invalid_v1_2_missing_super_device_id.json",
        TopologyError,
        "server_list[2].device[0].super_device_id: missing: every device needs a "
        "super_device_id when super_pod_list is given",
    ),
    (
        "invalid_v1_2_unequal_super_pods.json",
        TopologyError,
        "super_pod_list: super pods must hold the same number of servers, found [3, 1]",
    ),
    (
        "invalid_v1_2_unknown_server.json",
        TopologyError,
        'super_pod_list[1].server_list[1].server_id: server "192.0.2.69" is not in server_list',
    ),
    (
        "invalid_template2_duplicate_pod_name.json",
        TopologyError,
        "group_list[0].instance_list[1].pod_name: duplicate pod name "
        '"modelarts-job-3f1e0d2c-0000-4000-8000-000000000042-worker-0" '
        "(also group_list[0].instance_list[0])",
    ),
    (
        "invalid_template2_duplicate_device_id.json",
        TopologyError,
        'group_list[0].instance_list[1].devices[1].device_id: duplicate device id "0" on server '
        "192.0.2.22 (also group_list[0].instance_list[1].devices[0])",
    ),
    (
        "invalid_template2_duplicate_device_ip.json",
        TopologyError,
        'group_list[0].instance_list[1].devices[0].device_ip: duplicate device ip "198.51.100.102" '
        "(also group_list[0].instance_list[0].devices[1].device_ip)",
    ),
    (
        "invalid_template2_duplicate_group_name.json",
        TopologyError,
        'group_list[1].group_name: duplicate group name "worker" (also group_list[0])',
    ),
    (
        "invalid_template2_group_count_mismatch.json",
        TopologyError,
        'group_count: "2" does not match the 1 groups listed',
    ),
    (
        "invalid_template2_instance_count_mismatch.json",
        TopologyError,
        'group_list[0].instance_count: "3" does not match the 2 instances listed',
    ),
    (
        "invalid_template2_device_count_mismatch.json",
        TopologyError,
        'group_list[0].device_count: "16" does not match the 4 devices listed in instance_list',
    ),
]


@pytest.mark.parametrize(("name", "error", "message"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_table(name: str, error: Type[MalaunchError], message: str) -> None:
    path = OWN / name
    with pytest.raises(error) as info:
        load(path)
    assert type(info.value) is error
    assert str(info.value) == f"rank table {path}: {message}"


def write_json(folder: Path, document: object) -> Path:
    path = folder / "hccl.json"
    path.write_text(json.dumps(document))
    return path


def test_initializing_document_is_not_format_checked(tmp_path: Path) -> None:
    """A not-completed status wins over everything else, even an unsupported version."""
    raw = json.loads((OWN / "v2_0_a5.json").read_text())
    raw["status"] = "initializing"
    assert read_once(write_json(tmp_path, raw)) == NotReady("status", 'status is "initializing"')


def test_missing_status_is_not_ready(tmp_path: Path) -> None:
    raw = json.loads((SHARED / "ranktable_v1_0_2nodes_8dev.json").read_text())
    del raw["status"]
    expected = NotReady("status", 'status is missing (expected "completed")')
    assert read_once(write_json(tmp_path, raw)) == expected


def test_top_level_array_is_malformed(tmp_path: Path) -> None:
    expected = NotReady("malformed", "expected a JSON object, got a list")
    assert read_once(write_json(tmp_path, [1, 2])) == expected


def test_completed_read_returns_the_bytes_and_document(tmp_path: Path) -> None:
    path = write_json(tmp_path, {"status": "completed", "group_list": []})
    assert read_once(path) == Ready(
        path, path.read_bytes(), {"status": "completed", "group_list": []}
    )


def test_bulk_and_one_by_one_checks_agree() -> None:
    """Devices written as producers do take the bulk path; any other spelling the careful one."""
    path = SHARED / "ranktable_v1_0_2nodes_8dev.json"
    plain = parse_table(json.loads(path.read_text()), "t")
    raw = json.loads(path.read_text())
    for server in raw["server_list"]:
        server["device"][0]["device_id"] = int(server["device"][0]["device_id"])
    assert parse_table(raw, "t").servers == plain.servers

    path = SHARED / "ranktable_template2_2pods_8dev.json"
    plain = parse_table(json.loads(path.read_text()), "t")
    raw = json.loads(path.read_text())
    raw["group_list"][0]["instance_list"][0]["devices"][3]["device_id"] = 3
    assert parse_table(raw, "t").servers == plain.servers


def test_addresses_without_bulk_shape_are_still_compared() -> None:
    """An address list with "-1", a comma list or a spaced value is checked one by one."""
    raw = json.loads((SHARED / "ranktable_template2_2pods_8dev.json").read_text())
    pods = raw["group_list"][0]["instance_list"]
    pods[0]["devices"][0]["device_ip"] = "-1"
    pods[0]["devices"][1]["device_ip"] = "198.51.100.201,198.51.100.202"
    pods[1]["devices"][5]["device_ip"] = " 198.51.100.202"
    with pytest.raises(TopologyError) as info:
        parse_table(raw, "rank table t")
    assert str(info.value) == (
        "rank table t: group_list[0].instance_list[1].devices[5].device_ip: duplicate device ip "
        '" 198.51.100.202" (also group_list[0].instance_list[0].devices[1].device_ip)'
    )
