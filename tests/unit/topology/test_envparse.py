"""The shared parsers of platform variables (malaunch.topology.envparse)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import pytest

from malaunch.errors import TopologyError
from malaunch.topology import envparse


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a:1,b:2", ["a:1", "b:2"]),
        ("[a:1, b:2]", ["a:1", "b:2"]),
        ("['a:1', \"b:2\"]", ["a:1", "b:2"]),
        ('"a:1,b:2"', ["a:1", "b:2"]),
        ("  a:1 ,  b:2  ", ["a:1", "b:2"]),
        ("[[2001:db8::1]:2222,[2001:db8::2]:2222]", ["[2001:db8::1]:2222", "[2001:db8::2]:2222"]),
        # Brackets that belong to the first IPv6 item are not a wrapper.
        ("[2001:db8::1]:2222,[2001:db8::2]:2222", ["[2001:db8::1]:2222", "[2001:db8::2]:2222"]),
        ("single", ["single"]),
    ],
)
def test_split_items_unwraps_brackets_quotes_and_spaces(value: str, expected: List[str]) -> None:
    assert envparse.split_items(value, "X") == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a:1,,b:2", 'X item 2 is empty in "a:1,,b:2"'),
        ("a:1,", 'X item 2 is empty in "a:1,"'),
        ("[]", "X is empty: expected a comma-separated list"),
        ("' '", "X is empty: expected a comma-separated list"),
    ],
)
def test_split_items_rejects_empty_items(value: str, message: str) -> None:
    with pytest.raises(TopologyError) as info:
        envparse.split_items(value, "X")
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("host-a:2222", ("host-a", 2222)),
        ("192.0.2.1:1", ("192.0.2.1", 1)),
        ("[2001:db8::1]:65535", ("2001:db8::1", 65535)),
        ("job-tf-ps-0.job-tf:2222", ("job-tf-ps-0.job-tf", 2222)),
    ],
)
def test_split_host_port(item: str, expected: Tuple[str, int]) -> None:
    assert envparse.split_host_port(item, "W") == expected


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("host-b", "W: expected host:port"),
        ("host-b:", "W: port '' is not a number in 1-65535"),
        ("host-b:0", "W: port '0' is not a number in 1-65535"),
        ("host-b:65536", "W: port '65536' is not a number in 1-65535"),
        ("host-b:http", "W: port 'http' is not a number in 1-65535"),
        (":2222", "W: '' is not a host name or address"),
        ("2001:db8::1:2222", "W: an IPv6 address must be written in brackets, [address]:port"),
        ("[2001:db8::1]", "W: expected [address]:port"),
        ("[2001:db8::1:2222", "W: expected [address]:port"),
        ("[not-ipv6]:2222", "W: 'not-ipv6' is not an IPv6 address"),
        ("ho st:2222", "W: 'ho st' is not a host name or address"),
    ],
)
def test_split_host_port_rejects(item: str, message: str) -> None:
    with pytest.raises(TopologyError) as info:
        envparse.split_host_port(item, "W")
    assert str(info.value) == message


def test_parse_host_ports_names_variable_and_item() -> None:
    with pytest.raises(TopologyError) as info:
        envparse.parse_host_ports("host-a:2222,host-b", "TF_WORKER_HOSTS")
    assert str(info.value) == 'TF_WORKER_HOSTS item 2 "host-b": expected host:port'


def test_format_host_port_brackets_ipv6_only() -> None:
    assert envparse.format_host_port("2001:db8::1", 2222) == "[2001:db8::1]:2222"
    assert envparse.format_host_port("host-a", 2222) == "host-a:2222"


def test_parse_hosts_accepts_names_and_both_ipv6_spellings() -> None:
    value = "[node-a.job, 192.0.2.1, 2001:db8::1, '[2001:db8::2]']"
    assert envparse.parse_hosts(value, "H") == [
        "node-a.job",
        "192.0.2.1",
        "2001:db8::1",
        "2001:db8::2",
    ]


def test_parse_hosts_rejects_a_port() -> None:
    with pytest.raises(TopologyError) as info:
        envparse.parse_hosts("a,b:2222", "VC_WORKER_HOSTS")
    assert str(info.value) == (
        'VC_WORKER_HOSTS item 2 "b:2222": expected a host name or address without a port'
    )


@pytest.mark.parametrize("zone", ["eth0", "1", "en_p1.2-a"])
def test_ipv6_zone_of_an_interface_name_or_number(zone: str) -> None:
    address = f"fe80::1%{zone}"
    assert envparse.check_host(address, "H") == address
    assert envparse.parse_host(f"[{address}]", "H") == address
    assert envparse.parse_hosts(f"{address},b", "H") == [address, "b"]
    assert envparse.parse_host_ports(f"[{address}]:22", "H") == [(address, 22)]
    assert envparse.is_ip(address)


@pytest.mark.parametrize("zone", ["$(id)", "a b", "\x01", "é", "a;b"])
def test_ipv6_zone_with_anything_else_is_refused(zone: str) -> None:
    address = f"fe80::1%{zone}"
    assert not envparse.is_host(address)
    assert not envparse.is_ip(address)
    with pytest.raises(TopologyError) as info:
        envparse.parse_host(address, "MS_SCHED_HOST")
    assert str(info.value) == (
        f"MS_SCHED_HOST: {address!r} is not an IPv6 address (a zone after % holds only letters, "
        "digits, _ . -)"
    )
    with pytest.raises(TopologyError, match=r"^H item 1 .* zone"):
        envparse.parse_hosts(f"{address},b", "H")
    with pytest.raises(TopologyError, match=r"^H item 1 .* zone"):
        envparse.parse_host_ports(f"[{address}]:22,b:1", "H")


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, 7), ({"N": ""}, 7), ({"N": " 3 "}, 3), ({"N": "0"}, 0)],
)
def test_read_int(env: Dict[str, str], expected: int) -> None:
    assert envparse.read_int(env, "N", default=7) == expected


@pytest.mark.parametrize(
    ("value", "minimum", "message"),
    [
        ("abc", 0, 'N="abc": expected a non-negative integer'),
        ("-1", 0, 'N="-1": expected a non-negative integer'),
        ("1.5", 0, 'N="1.5": expected a non-negative integer'),
        ("0", 1, 'N="0": expected an integer >= 1'),
    ],
)
def test_read_int_rejects(value: str, minimum: int, message: str) -> None:
    with pytest.raises(TopologyError) as info:
        envparse.read_int({"N": value}, "N", minimum=minimum)
    assert str(info.value) == message


def test_read_port() -> None:
    assert envparse.read_port({"P": "6060"}, "P") == 6060
    assert envparse.read_port({"P": ""}, "P") is None
    with pytest.raises(TopologyError) as info:
        envparse.read_port({"P": "70000"}, "P")
    assert str(info.value) == "P=\"70000\": port '70000' is not a number in 1-65535"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"MA_VJ_NAME": "ma-job-0d3c"}, "modelarts-job-0d3c"),
        ({"MA_VJ_NAME": "custom-name"}, "custom-name"),
        ({"MA_VJ_NAME": "custom-name", "BATCH_JOB_ID": "b1"}, "custom-name"),
        ({"BATCH_JOB_ID": "b1"}, "b1"),
        ({"MA_VJ_NAME": ""}, None),
        ({}, None),
    ],
)
def test_job_id(env: Dict[str, str], expected: Optional[str]) -> None:
    assert envparse.job_id(env) == expected


@pytest.mark.parametrize(
    ("host", "task", "index", "expected"),
    [
        ("job-demo-worker-0.job-demo", "worker", 0, "job-demo"),
        ("tfjob-demo-chief-0.default.svc", "chief", 0, "tfjob-demo"),
        ("job-1-worker-10.job-1", "worker", 1, None),  # worker-1 is not worker-10
        ("worker-0", "worker", 0, None),
        ("192.0.2.1", "worker", 0, None),
    ],
)
def test_job_name_from_host(host: str, task: str, index: int, expected: Optional[str]) -> None:
    assert envparse.job_name_from_host(host, task, index) == expected


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"CUDA_VISIBLE_DEVICES": ""}, None),
        ({"ASCEND_RT_VISIBLE_DEVICES": "4,5,6,7"}, ("ASCEND_RT_VISIBLE_DEVICES", (4, 5, 6, 7))),
        (
            {"ASCEND_RT_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "3"},
            ("ASCEND_RT_VISIBLE_DEVICES", (0, 1)),
        ),
        ({"CUDA_VISIBLE_DEVICES": "3,1"}, ("CUDA_VISIBLE_DEVICES", (3, 1))),
        ({"CUDA_VISIBLE_DEVICES": "GPU-aa-01,MIG-bb/1/2"}, ("CUDA_VISIBLE_DEVICES", (0, 1))),
    ],
)
def test_visible_devices(
    env: Dict[str, str], expected: Optional[Tuple[str, Tuple[int, ...]]]
) -> None:
    assert envparse.visible_devices(env) == expected


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"ASCEND_RT_VISIBLE_DEVICES": "0, 1"},
            'ASCEND_RT_VISIBLE_DEVICES="0, 1": item 2 " 1" is not a device id '
            "(expected ascending integers without spaces, e.g. 0,1,2,3)",
        ),
        (
            {"ASCEND_RT_VISIBLE_DEVICES": "0,x,2"},
            'ASCEND_RT_VISIBLE_DEVICES="0,x,2": item 2 "x" is not a device id '
            "(expected ascending integers without spaces, e.g. 0,1,2,3)",
        ),
        (
            {"ASCEND_RT_VISIBLE_DEVICES": "3,1"},
            'ASCEND_RT_VISIBLE_DEVICES="3,1": device ids must be in ascending order',
        ),
        (
            {"CUDA_VISIBLE_DEVICES": "1,1"},
            'CUDA_VISIBLE_DEVICES="1,1": a device id is listed twice',
        ),
        (
            {"CUDA_VISIBLE_DEVICES": "0,GPU-aa"},
            'CUDA_VISIBLE_DEVICES="0,GPU-aa": item 2 "GPU-aa" is not a device id '
            "(expected ascending integers without spaces, e.g. 0,1,2,3)",
        ),
    ],
)
def test_visible_devices_rejects(env: Dict[str, str], message: str) -> None:
    with pytest.raises(TopologyError) as info:
        envparse.visible_devices(env)
    assert str(info.value) == message


def test_device_ids() -> None:
    visible = {"CUDA_VISIBLE_DEVICES": "2,3,5"}
    assert envparse.device_ids({}, None, "N") == (0,)
    assert envparse.device_ids({}, 3, "N") == (0, 1, 2)
    assert envparse.device_ids(visible, None, "N") == (2, 3, 5)
    assert envparse.device_ids(visible, 2, "N") == (2, 3)
    with pytest.raises(TopologyError) as info:
        envparse.device_ids(visible, 4, "--nproc-per-node")
    assert str(info.value) == (
        "--nproc-per-node asks for 4 processes per node but CUDA_VISIBLE_DEVICES lists 3"
    )
