"""/etc/hccn.conf parsing on the shared fixture and on malformed text."""

from __future__ import annotations

from pathlib import Path

import pytest

from malaunch.errors import MissingInputError, TopologyError
from malaunch.topology.ranktable.hccn import parse_hccn_conf, read_hccn_conf

FIXTURE = Path(__file__).parents[3] / "fixtures" / "shared" / "hccn_conf_example.conf"


def test_fixture_maps_each_npu_to_its_address() -> None:
    addresses = read_hccn_conf(FIXTURE)
    assert addresses == {n: f"198.51.100.{n + 1}" for n in range(8)}


def test_netmask_netdetect_blank_lines_and_comments_are_ignored() -> None:
    text = "# written by hccn_tool\n\naddress_3 = 198.51.100.4\nnetmask_3=255.255.255.0\n"
    text += "netdetect_3=198.51.100.254\ngateway_3=198.51.100.254\n  # indented comment\n"
    assert parse_hccn_conf(text, "/etc/hccn.conf") == {3: "198.51.100.4"}


def test_ipv6_address() -> None:
    assert parse_hccn_conf("address_0=2001:db8::1\n", "h.conf") == {0: "2001:db8::1"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "address_0=198.51.100.1\naddress_0=198.51.100.9\n",
            "h.conf line 2: address_0: device 0 already has an address (line 1)",
        ),
        (
            "netmask_0=255.255.255.0\naddress_x=198.51.100.1\n",
            'h.conf line 2: "address_x": expected address_<N> with N a device number',
        ),
        ("address_1=198.51.100\n", 'h.conf line 1: address_1: "198.51.100" is not an IP address'),
        ("address_1=\n", 'h.conf line 1: address_1: "" is not an IP address'),
        (
            "\n# c\naddress_1 198.51.100.2\n",
            'h.conf line 3: "address_1 198.51.100.2": expected KEY=VALUE',
        ),
    ],
    ids=["duplicate", "bad-key", "bad-ip", "empty-ip", "no-equals"],
)
def test_malformed_lines(text: str, message: str) -> None:
    with pytest.raises(TopologyError) as caught:
        parse_hccn_conf(text, "h.conf")
    assert str(caught.value) == message


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "hccn.conf"
    with pytest.raises(MissingInputError) as caught:
        read_hccn_conf(path)
    assert str(caught.value) == f"{path}: the file does not exist"
    assert caught.value.exit_code == 66


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "hccn.conf"
    path.write_bytes(b"address_0=198.51.100.1\n\xff\n")
    with pytest.raises(TopologyError) as caught:
        read_hccn_conf(path)
    assert str(caught.value) == f"{path}: not UTF-8 text (byte 23)"


def test_a_file_past_1_mib_is_malformed_not_missing(tmp_path: Path) -> None:
    """A rank table past its limit is 65 (README "Limits on input"); so is an hccn.conf, which
    was 66 ("cannot read"), though it was read."""
    conf = tmp_path / "hccn.conf"
    conf.write_bytes(b"address_0=192.168.1.1\n" * 50_000)
    with pytest.raises(TopologyError) as info:
        read_hccn_conf(conf)
    assert str(info.value) == f"{conf}: is {conf.stat().st_size} bytes, more than 1048576"
