"""Addresses in rank tables: server ids are host names, device and host IPs are addresses.

Peers dial them and logs show them, so ``ranktable validate`` and a launch refuse the same
values, naming the input file and the JSON path (template 2: before a converted file exists).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from malaunch.errors import TopologyError
from malaunch.topology.ranktable.formats import parse_table

SHARED = Path(__file__).parents[3] / "fixtures" / "shared"


def v1() -> Dict[str, Any]:
    doc: Dict[str, Any] = json.loads((SHARED / "ranktable_v1_0_2nodes_8dev.json").read_text())
    return doc


def t2() -> Dict[str, Any]:
    doc: Dict[str, Any] = json.loads((SHARED / "ranktable_template2_2pods_8dev.json").read_text())
    return doc


def refused(doc: Dict[str, Any]) -> str:
    with pytest.raises(TopologyError) as info:
        parse_table(doc, "rank table t")
    return str(info.value)


@pytest.mark.parametrize("value", ["$(id)", "a b", "a\u0001b", "n;id", "[::1]"])
def test_server_id_must_be_a_host(value: str) -> None:
    doc = v1()
    doc["server_list"][1]["server_id"] = value
    assert refused(doc) == (
        f"rank table t: server_list[1].server_id: {json.dumps(value)} is not a host name or address"
    )


def test_template2_server_id_names_the_input_path() -> None:
    doc = t2()
    doc["group_list"][0]["instance_list"][0]["server_id"] = "$(id)"
    assert refused(doc) == (
        'rank table t: group_list[0].instance_list[0].server_id: "$(id)" is not a host name or '
        "address"
    )


@pytest.mark.parametrize("key", ["host_ip", "container_ip"])
def test_host_and_container_ip_must_be_hosts(key: str) -> None:
    doc = v1()
    for server in doc["server_list"]:
        server[key] = "192.0.2.1"
    doc["server_list"][0][key] = "a b"
    assert (
        refused(doc) == f'rank table t: server_list[0].{key}: "a b" is not a host name or address'
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("$(id)", '"$(id)"'),
        ("198.51.100.300", '"198.51.100.300"'),
        ("198.51.100.99,x", '"x"'),  # each NIC of a comma list
        ("fe80::1%a b", '"fe80::1%a b"'),
    ],
)
def test_device_ip_must_be_an_address(value: str, shown: str) -> None:
    doc = v1()
    doc["server_list"][0]["device"][2]["device_ip"] = value
    assert refused(doc) == (
        f"rank table t: server_list[0].device[2].device_ip: {shown} is not an IP address"
    )


def test_template2_device_ip_names_the_input_path() -> None:
    doc = t2()
    doc["group_list"][0]["instance_list"][1]["devices"][0]["device_ip"] = "`id`"
    assert refused(doc) == (
        'rank table t: group_list[0].instance_list[1].devices[0].device_ip: "`id`" is not an IP '
        "address"
    )


@pytest.mark.parametrize("value", ["", "-1", "198.51.100.201, 198.51.100.202", "2001:db8::7"])
def test_what_is_not_compared_or_several_nics_or_ipv6_pass(value: str) -> None:
    doc = v1()
    doc["server_list"][0]["device"][2]["device_ip"] = value
    parse_table(doc, "rank table t")


def test_a_long_culprit_is_shortened() -> None:
    doc = v1()
    doc["server_list"][0]["server_id"] = "$" * 5000
    assert len(refused(doc)) < 200
