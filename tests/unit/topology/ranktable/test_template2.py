"""Template 2 -> template 1: pod-index order, skipped CPU groups, shared nodes, written file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from malaunch.errors import TopologyError
from malaunch.topology.ranktable.formats import parse_table
from malaunch.topology.ranktable.source import _load_now, convert_file
from malaunch.topology.ranktable.template2 import pod_index
from malaunch.topology.ranktable.write import v1_text

FIXTURES = Path(__file__).parents[3] / "fixtures"
SHARED = FIXTURES / "shared"
OWN = FIXTURES / "rank_tables"
JOB = "modelarts-job-3f1e0d2c-0000-4000-8000-000000000042"


def devices_of(document: Dict[str, Any]) -> List[List[Dict[str, str]]]:
    return [server["device"] for server in document["server_list"]]


def test_pod_index_is_the_integer_after_the_last_dash() -> None:
    assert pod_index("job-7-worker-10") == 10
    assert pod_index("jobb0f1370b-job-mindspore-0") == 0
    assert pod_index("worker") is None
    assert pod_index("worker-x") is None
    assert pod_index("worker-\u0663") is None  # a non-ASCII digit is not an index


def test_order_trap_follows_pod_index_not_names_or_server_ids() -> None:
    table = _load_now(OWN / "template2_order_trap.json")
    names = [s.pod_name or "" for s in table.servers]
    assert names == [f"{JOB}-worker-1", f"{JOB}-worker-2", f"{JOB}-worker-10"]
    # Neither string order of the names nor HCCL's byte order of server_id.
    assert names != sorted(names)
    assert [s.server_id for s in table.servers] == ["192.0.2.9", "192.0.2.10", "192.0.2.100"]
    assert [[e.rank for e in s.devices] for s in table.servers] == [[0, 1], [2, 3], [4, 5]]
    document = json.loads(v1_text(table))
    assert [s["server_id"] for s in document["server_list"]] == [
        "192.0.2.9",
        "192.0.2.10",
        "192.0.2.100",
    ]
    assert devices_of(document)[2] == [
        {"device_id": "0", "device_ip": "198.51.100.110", "rank_id": "4"},
        {"device_id": "1", "device_ip": "198.51.100.111", "rank_id": "5"},
    ]


def test_cpu_ps_group_is_skipped_and_ranks_go_group_by_group() -> None:
    table = _load_now(OWN / "template2_multigroup_cpu_ps.json")
    assert table.details == (
        "group ps: skipped (device_count 0)",
        "group worker: 2 pods, ranks 0-3",
        "group evaluator: 1 pod, rank 4",
    )
    assert [(s.pod_name, [e.rank for e in s.devices]) for s in table.servers] == [
        (f"{JOB}-worker-0", [0, 1]),
        (f"{JOB}-worker-1", [2, 3]),
        (f"{JOB}-evaluator-0", [4]),
    ]


def test_pods_sharing_a_node_are_merged_into_one_v1_server() -> None:
    table = _load_now(OWN / "template2_shared_server.json")
    # Two pods, one node: the Topology keeps both pods (each runs its own launcher) ...
    assert [(s.server_id, s.pod_name) for s in table.servers] == [
        ("192.0.2.31", f"{JOB}-worker-0"),
        ("192.0.2.31", f"{JOB}-worker-1"),
    ]
    # ... worker-1 keeps its device list order (5, 4, 7, 6) for rank numbering ...
    assert [(e.device_id, e.rank) for e in table.servers[1].devices] == [
        (5, 4),
        (4, 5),
        (7, 6),
        (6, 7),
    ]
    # ... and template 1 (unique server ids) gets one server entry, as ModelArts writes it.
    document = json.loads(v1_text(table))
    assert document["server_count"] == "1"
    assert [(d["device_id"], d["rank_id"]) for d in devices_of(document)[0]] == [
        ("0", "0"),
        ("1", "1"),
        ("2", "2"),
        ("3", "3"),
        ("5", "4"),
        ("4", "5"),
        ("7", "6"),
        ("6", "7"),
    ]


def test_pods_sharing_a_node_cannot_share_a_device() -> None:
    raw = json.loads((OWN / "template2_shared_server.json").read_text())
    raw["group_list"][0]["instance_list"][0]["devices"][0]["device_id"] = "3"
    with pytest.raises(TopologyError) as info:
        parse_table(raw, "rank table t")
    assert str(info.value) == (
        "rank table t: group_list[0].instance_list[1].devices[3].device_id: duplicate device id "
        '"3" on server 192.0.2.31 (also group_list[0].instance_list[0].devices[0])'
    )


def test_duplicate_pod_index_in_a_group_is_rejected() -> None:
    raw = json.loads((SHARED / "ranktable_template2_2pods_8dev.json").read_text())
    raw["group_list"][0]["instance_list"][0]["pod_name"] = "other-job-worker-0"
    with pytest.raises(TopologyError) as info:
        parse_table(raw, "rank table t")
    assert str(info.value) == (
        "rank table t: group_list[0].instance_list[1].pod_name: pod index 0 of "
        '"modelarts-job-0d3c5a9e-0000-4000-8000-000000000001-worker-0" is also the index of '
        '"other-job-worker-0"'
    )


def test_pod_index_longer_than_any_index_is_rejected() -> None:
    """int() raises past 4,300 digits; no pod is numbered past 18."""
    raw = json.loads((SHARED / "ranktable_template2_2pods_8dev.json").read_text())
    raw["group_list"][0]["instance_list"][0]["pod_name"] = "worker-" + "9" * 5000
    with pytest.raises(TopologyError) as info:
        parse_table(raw, "rank table t")
    assert str(info.value) == (
        'rank table t: group_list[0].instance_list[0].pod_name: the pod index after the last "-" '
        "has 5000 digits"
    )
    assert pod_index("worker-" + "9" * 19) is None


def test_pod_without_index_in_a_multi_pod_group_is_rejected() -> None:
    raw = json.loads((SHARED / "ranktable_template2_2pods_8dev.json").read_text())
    raw["group_list"][0]["instance_list"][0]["pod_name"] = "worker-a"
    with pytest.raises(TopologyError) as info:
        parse_table(raw, "rank table t")
    assert str(info.value) == (
        'rank table t: group_list[0].instance_list[0].pod_name: "worker-a" does not end in '
        "-<index>: cannot order the pods of worker"
    )


def test_only_cpu_groups_is_an_error() -> None:
    raw = {
        "status": "completed",
        "group_count": "1",
        "group_list": [
            {"group_name": "ps", "device_count": "0", "instance_count": "1", "instance_list": []}
        ],
    }
    with pytest.raises(TopologyError) as info:
        parse_table(raw, "rank table t")
    assert str(info.value) == (
        "rank table t: group_list: no group has devices (every device_count is 0)"
    )


def test_convert_file_writes_template_1(tmp_path: Path) -> None:
    source = SHARED / "ranktable_template2_2pods_8dev.json"
    target = tmp_path / "out" / "hccl.json"
    summary = convert_file(source, target)
    assert summary == (
        f"wrote {target}: template 1 version 1.0, 2 servers, 16 ranks (from template 2 {source})"
    )
    written = json.loads(target.read_text())
    assert list(written) == ["status", "version", "server_count", "server_list"]
    assert (written["status"], written["version"], written["server_count"]) == (
        "completed",
        "1.0",
        "2",
    )
    assert [s["server_id"] for s in written["server_list"]] == ["192.0.2.21", "192.0.2.22"]
    assert devices_of(written)[1][0] == {
        "device_id": "0",
        "device_ip": "198.51.100.121",
        "rank_id": "8",
    }
    ranks = [int(d["rank_id"]) for server in devices_of(written) for d in server]
    assert ranks == list(range(16))
    # The written file is itself a valid template-1 table with the same layout.
    assert _load_now(target).servers[1].server_id == "192.0.2.22"
    assert list(tmp_path.joinpath("out").iterdir()) == [target]  # no temporary file left


def test_template_1_is_normalised_with_strings_and_unknown_keys_kept(tmp_path: Path) -> None:
    target = tmp_path / "merged.json"
    convert_file(OWN / "v1_0_merged_int_rankid.json", target)
    written = json.loads(target.read_text())
    first = written["server_list"][0]
    assert first["host_nic_ip"] == "reserve"
    assert first["device"][3] == {"device_id": "3", "device_ip": "198.51.100.4", "rank_id": "3"}


def test_v1_2_keeps_version_and_super_pods(tmp_path: Path) -> None:
    target = tmp_path / "sp.json"
    summary = convert_file(OWN / "v1_2_superpod.json", target)
    assert "template 1 version 1.2, 4 servers, 8 ranks (from template 1 version 1.2" in summary
    written = json.loads(target.read_text())
    original = json.loads((OWN / "v1_2_superpod.json").read_text())
    assert written["version"] == "1.2"
    assert written["super_pod_list"] == original["super_pod_list"]
    assert written["server_list"] == original["server_list"]


@pytest.mark.parametrize(
    "path", [OWN / "template2_order_trap.json", OWN / "v1_0_merged_int_rankid.json"]
)
def test_written_text_is_json_with_one_server_per_line(path: Path) -> None:
    table = _load_now(path)
    text = v1_text(table)
    document = json.loads(text)
    server_lines = [line for line in text.splitlines() if '"server_id"' in line]
    assert len(server_lines) == len(document["server_list"]) == len(table.servers)
    assert [json.loads(line.strip().rstrip(",")) for line in server_lines] == document[
        "server_list"
    ]


def test_addresses_are_escaped_as_json() -> None:
    raw = json.loads((SHARED / "ranktable_template2_2pods_8dev.json").read_text())
    raw["group_list"][0]["instance_list"][0]["devices"][0]["device_ip"] = "fe80::1%eth0"
    del raw["group_list"][0]["instance_list"][1]["devices"][7]["device_ip"]
    table = parse_table(raw, "t")
    # The parser refuses such a server_id; the writer must still quote whatever it is given.
    odd = table.servers[1]._replace(server_id='odd "name" \u00e9')
    document = json.loads(v1_text(table._replace(servers=(table.servers[0], odd))))
    assert document["server_list"][1]["server_id"] == 'odd "name" \u00e9'
    assert document["server_list"][1]["device"][0]["device_ip"] == "fe80::1%eth0"
    assert document["server_list"][0]["device"][7] == {"device_id": "7", "rank_id": "7"}
