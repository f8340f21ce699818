"""The one-server v1.0 table and the --devices forms of `malaunch ranktable generate`."""

from __future__ import annotations

from typing import List

import pytest

from malaunch.errors import TopologyError, UsageError
from malaunch.topology.ranktable.generate import parse_device_spec, single_server_table

HINT = " (expected e.g. 0-7, 0,1,2,3 or [0,8))"
IPS = {n: f"198.51.100.{n + 1}" for n in range(8)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-7", list(range(8))),
        ("0,1,2,3", [0, 1, 2, 3]),
        ("[0,8)", list(range(8))),
        ("[4,7]", [4, 5, 6, 7]),
        (" [ 8 , 16 ) ", list(range(8, 16))),
        ("3", [3]),
        ("6,0-2, 4", [0, 1, 2, 4, 6]),
        ("15", [15]),
    ],
)
def test_device_spec_forms(text: str, expected: List[int]) -> None:
    assert parse_device_spec(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0-16", '--devices "0-16": device 16 is out of range (0-15)'),
        ("[0,17)", '--devices "[0,17)": device 16 is out of range (0-15)'),
        ("5-2", '--devices "5-2": the range holds no device'),
        ("[3,3)", '--devices "[3,3)": the range holds no device'),
        ("0-3,2", '--devices "0-3,2": device 2 is given twice'),
        (
            "0,,1",
            '--devices "0,,1": "" is not a device id or range' + HINT,
        ),
        (
            "-1",
            '--devices "-1": "-1" is not a device id or range' + HINT,
        ),
        (
            "[0,8",
            '--devices "[0,8": "[0" is not a device id or range' + HINT,
        ),
    ],
)
def test_device_spec_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_device_spec(text)
    assert str(caught.value) == message


def test_error_names_the_option_given() -> None:
    with pytest.raises(UsageError, match=r'^--visible-devices "x": '):
        parse_device_spec("x", option="--visible-devices")


def test_single_server_table() -> None:
    table = single_server_table("192.0.2.31", [4, 5, 6, 7], IPS)
    assert table == {
        "version": "1.0",
        "server_count": "1",
        "server_list": [
            {
                "server_id": "192.0.2.31",
                "device": [
                    {"device_id": str(d), "device_ip": f"198.51.100.{d + 1}", "rank_id": str(r)}
                    for r, d in enumerate([4, 5, 6, 7])
                ],
                "host_nic_ip": "reserve",
            }
        ],
        "status": "completed",
    }


def test_devices_keep_the_given_order() -> None:
    table = single_server_table("node_0", [2, 0], IPS)
    device = table["server_list"][0]["device"]
    assert [(d["device_id"], d["rank_id"]) for d in device] == [("2", "0"), ("0", "1")]


def test_device_without_address_names_device_and_file() -> None:
    with pytest.raises(TopologyError) as caught:
        single_server_table("192.0.2.31", [6, 7, 8], IPS, "/etc/hccn.conf")
    assert str(caught.value) == "device 8: no address_8 line in /etc/hccn.conf"


@pytest.mark.parametrize(
    ("server_id", "devices", "message"),
    [
        ("", [0], 'server id "": expected 1-63 characters'),
        ("x" * 64, [0], f'server id "{"x" * 64}": expected 1-63 characters'),
        ("192.0.2.31", [], "server 192.0.2.31: no devices"),
    ],
    ids=["empty-id", "long-id", "no-devices"],
)
def test_table_errors(server_id: str, devices: List[int], message: str) -> None:
    with pytest.raises(TopologyError) as caught:
        single_server_table(server_id, devices, IPS)
    assert str(caught.value) == message
