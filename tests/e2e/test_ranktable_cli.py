"""`malaunch ranktable validate|convert` and `malaunch topology` on rank tables (subprocess)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict

import pytest

from malaunch.testing import CliResult, clean_env, read_env_file, run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures"
SHARED = FIXTURES / "shared"
OWN = FIXTURES / "rank_tables"
MA_JOB = "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001"


def assert_one_line_error(result: CliResult, code: int, message: str) -> None:
    assert result.code == code, result.stderr
    assert result.stdout == ""
    assert result.stderr == f"malaunch: error: {message}\n"
    assert "Traceback" not in result.stderr


def test_validate_ok() -> None:
    path = SHARED / "ranktable_v1_0_2nodes_8dev.json"
    result = run_cli(["ranktable", "validate", str(path)])
    assert result.code == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == (
        f"rank table {path}: template 1 version 1.0, status completed\n"
        "2 servers, 16 ranks\n"
        "server 192.0.2.11: ranks 0-7, device ids 0-7\n"
        "server 192.0.2.12: ranks 8-15, device ids 0-7\n"
    )


def test_validate_template2_shows_pods_and_skipped_groups() -> None:
    path = OWN / "template2_multigroup_cpu_ps.json"
    result = run_cli(["ranktable", "validate", str(path)])
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:5] == [
        f"rank table {path}: template 2, status completed",
        "3 pods on 3 servers, 5 ranks (pods in pod-name index order)",
        "group ps: skipped (device_count 0)",
        "group worker: 2 pods, ranks 0-3",
        "group evaluator: 1 pod, rank 4",
    ]
    assert lines[-1].endswith("-evaluator-0: ranks 4, device ids 3")


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        (
            SHARED / "invalid_ranktable_v1_0_duplicate_device_id.json",
            65,
            'server_list[1].device[3].device_id: duplicate device id "2" in server 192.0.2.12 '
            "(also server_list[1].device[2])",
        ),
        (
            OWN / "v2_0_a5.json",
            65,
            'unsupported rank table version "2.0" (the Atlas A5 layout with rank_list; '
            "supported: 1.0, 1.2, template 2)",
        ),
        (OWN / "empty.json", 65, "the file is empty"),
        (OWN / "missing.json", 66, "the file does not exist"),
        (
            SHARED / "ranktable_initial_configmap.json",
            69,
            'not ready: status is "initializing"; a launch would wait until it is "completed"',
        ),
    ],
    ids=["invalid", "unsupported", "empty", "missing", "initializing"],
)
def test_validate_errors(path: Path, code: int, message: str) -> None:
    result = run_cli(["ranktable", "validate", str(path)])
    assert_one_line_error(result, code, f"rank table {path}: {message}")


def test_convert_template2(tmp_path: Path) -> None:
    source = OWN / "template2_order_trap.json"
    target = tmp_path / "v1.json"
    result = run_cli(["ranktable", "convert", str(source), str(target)])
    assert result.code == 0, result.stderr
    assert result.stdout == (
        f"wrote {target}: template 1 version 1.0, 3 servers, 6 ranks (from template 2 {source})\n"
    )
    written = json.loads(target.read_text())
    assert written["status"] == "completed"
    assert written["version"] == "1.0"
    assert written["server_count"] == "3"
    assert [
        (s["server_id"], [d["rank_id"] for d in s["device"]]) for s in written["server_list"]
    ] == [
        ("192.0.2.9", ["0", "1"]),
        ("192.0.2.10", ["2", "3"]),
        ("192.0.2.100", ["4", "5"]),
    ]
    # The converted file validates as template 1.
    again = run_cli(["ranktable", "validate", str(target)])
    assert again.code == 0, again.stderr
    assert "server 192.0.2.100: ranks 4-5, device ids 0-1" in again.stdout


def test_convert_to_a_place_it_cannot_write_is_74_naming_why(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "hccl.json"
    result = run_cli(["ranktable", "convert", str(SHARED / "ranktable_template2_2pods_8dev.json"),
                      str(out)])  # fmt: skip
    assert (result.code, result.stdout) == (74, "")
    assert result.stderr == (
        f"malaunch: error: cannot write rank table {out}: {tmp_path / 'file'} is a file, "
        "not a directory\n"
    )


def test_convert_refuses_invalid_input_and_writes_nothing(tmp_path: Path) -> None:
    source = OWN / "invalid_template2_device_count_mismatch.json"
    target = tmp_path / "v1.json"
    result = run_cli(["ranktable", "convert", str(source), str(target)])
    assert_one_line_error(
        result,
        65,
        f'rank table {source}: group_list[0].device_count: "16" does not match the 4 devices '
        "listed in instance_list",
    )
    assert not target.exists()


# --- malaunch topology with the ranktable source -------------------------------------------


@pytest.fixture
def modelarts_env(tmp_path: Path) -> Dict[str, str]:
    """The ModelArts fixture environment with its table in a tmp folder, run from tmp_path."""
    config = tmp_path / "config"
    config.mkdir()
    shutil.copy(SHARED / "ranktable_template2_2pods_8dev.json", config / "jobstart_hccl.json")
    env = clean_env(read_env_file(SHARED / "modelarts_ascend_env_example.env"))
    env.update(
        RANK_TABLE_FILE=str(config),
        MA_MOUNT_PATH=str(tmp_path / "mount"),
        MA_LOG_DIR=str(tmp_path / "log"),
        MALAUNCH_VOLCANO_DIR=str(tmp_path),
    )
    return env


def test_topology_json_from_the_rank_table(modelarts_env: Dict[str, str], tmp_path: Path) -> None:
    result = run_cli(["topology", "--topology", "ranktable", "--json"], env=modelarts_env)
    assert result.code == 0, result.stderr
    topo = json.loads(result.stdout)
    written = tmp_path / "mount" / "rank_table" / "jobstart_hccl.json"
    assert topo["source"] == "ranktable"
    assert topo["node_rank"] == 0
    assert topo["master_addr"] == "192.0.2.21"
    assert topo["job_id"] == MA_JOB
    assert topo["rank_table_file"] == str(written)
    assert [n["name"] for n in topo["nodes"]] == [f"{MA_JOB}-worker-0", f"{MA_JOB}-worker-1"]
    assert [d["rank"] for d in topo["nodes"][1]["devices"]] == list(range(8, 16))
    assert json.loads(written.read_text())["server_count"] == "2"


def test_auto_picks_the_rank_table(modelarts_env: Dict[str, str]) -> None:
    result = run_cli(["topology", "--json"], env=modelarts_env)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["source"] == "ranktable"


def test_topology_times_out_on_an_initializing_table(tmp_path: Path) -> None:
    path = tmp_path / "hccl.json"
    shutil.copy(SHARED / "ranktable_template2_initializing.json", path)
    env = clean_env({"RANK_TABLE_FILE": str(path)})
    result = run_cli(
        ["topology", "--topology", "ranktable", "--wait-timeout", "0"], env=env, cwd=tmp_path
    )
    assert_one_line_error(
        result,
        69,
        f'rank table {path} (from RANK_TABLE_FILE) not ready after 0s: status is "initializing" '
        "(see --wait-timeout)",
    )
