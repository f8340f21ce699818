"""`malaunch ranktable generate` (subprocess): write, validate and resolve a bare-metal table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malaunch.testing import CliResult, clean_env, run_cli

HCCN = Path(__file__).parents[1] / "fixtures" / "shared" / "hccn_conf_example.conf"


def assert_one_line_error(result: CliResult, code: int, message: str) -> None:
    assert result.code == code, result.stderr
    assert result.stdout == ""
    assert result.stderr == f"malaunch: error: {message}\n"
    assert "Traceback" not in result.stderr


def generate(out: Path, *options: str) -> CliResult:
    return run_cli(["ranktable", "generate", str(out), "--hccn-conf", str(HCCN), *options])


def test_generate_validate_and_resolve(tmp_path: Path) -> None:
    out = tmp_path / "tables" / "hccl_4p_4567_192.0.2.31.json"
    result = generate(out, "--devices", "4-7", "--server-id", "192.0.2.31")
    assert result.code == 0, result.stderr
    assert result.stdout == (
        f"wrote {out}: template 1 version 1.0, server 192.0.2.31, 4 ranks on devices 4-7 "
        f"(device IPs from {HCCN})\n"
    )
    written = json.loads(out.read_text())
    assert written["server_list"][0]["device"][0] == {
        "device_id": "4",
        "device_ip": "198.51.100.5",
        "rank_id": "0",
    }
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary file left

    checked = run_cli(["ranktable", "validate", str(out)])
    assert checked.code == 0, checked.stderr
    assert checked.stdout.splitlines()[1:] == [
        "1 server, 4 ranks",
        "server 192.0.2.31: ranks 0-3, device ids 4-7",
    ]

    env = clean_env({"RANK_TABLE_FILE": str(out), "MA_LOG_DIR": str(tmp_path / "log")})
    resolved = run_cli(["topology", "--topology", "ranktable", "--json"], env=env, cwd=tmp_path)
    assert resolved.code == 0, resolved.stderr
    topo = json.loads(resolved.stdout)
    assert (topo["source"], topo["node_rank"]) == ("ranktable", 0)
    assert topo["rank_table_file"] == str(out)
    (node,) = topo["nodes"]
    devices = node["devices"]
    assert [d["rank"] for d in devices] == [0, 1, 2, 3]
    assert [d["device_id"] for d in devices] == [4, 5, 6, 7]
    assert [d["local_index"] for d in devices] == [0, 1, 2, 3]
    assert [d["device_ip"] for d in devices] == [f"198.51.100.{n}" for n in (5, 6, 7, 8)]


def test_default_devices_and_server_id(tmp_path: Path) -> None:
    out = tmp_path / "hccl.json"
    result = generate(out)
    assert result.code == 0, result.stderr
    server = json.loads(out.read_text())["server_list"][0]
    assert [d["device_id"] for d in server["device"]] == [str(n) for n in range(8)]
    assert server["server_id"] in result.stdout
    assert server["server_id"] != ""


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        (
            "address_0=198.51.100.1\naddress_0=198.51.100.2\n",
            65,
            "{hccn} line 2: address_0: device 0 already has an address (line 1)",
        ),
        ("address_0=198.51.100.1\n", 65, "device 1: no address_1 line in {hccn}"),
    ],
    ids=["duplicate", "no-address"],
)
def test_bad_hccn_conf(tmp_path: Path, text: str, code: int, message: str) -> None:
    hccn = tmp_path / "hccn.conf"
    hccn.write_text(text)
    out = tmp_path / "hccl.json"
    args = ["ranktable", "generate", str(out), "--devices", "0,1", "--hccn-conf", str(hccn)]
    result = run_cli([*args, "--server-id", "192.0.2.31"])
    assert_one_line_error(result, code, message.format(hccn=hccn))
    assert not out.exists()


def test_missing_hccn_conf(tmp_path: Path) -> None:
    hccn = tmp_path / "hccn.conf"
    out = tmp_path / "hccl.json"
    args = ["ranktable", "generate", str(out), "--hccn-conf", str(hccn), "--server-id", "x"]
    assert_one_line_error(run_cli(args), 66, f"{hccn}: the file does not exist")
    assert not out.exists()


def test_bad_devices_is_a_usage_error(tmp_path: Path) -> None:
    out = tmp_path / "hccl.json"
    result = generate(out, "--devices", "0-16", "--server-id", "192.0.2.31")
    assert_one_line_error(result, 64, '--devices "0-16": device 16 is out of range (0-15)')
    assert not out.exists()
