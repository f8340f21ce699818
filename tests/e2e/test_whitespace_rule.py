"""Where surrounding whitespace is removed and where it is refused (README, "Limits on input").

A platform variable's value is stripped (shell scripts write them with a trailing newline, and
a space changes no number); the launch options and their ``MALAUNCH_`` variables, rank-table
fields and the visible-device lists, where a space may hide a misread, are taken exactly.
Through the installed ``malaunch``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import pytest

from malaunch.testing import clean_env, read_env_file, run_cli

SHARED = Path(__file__).parents[1] / "fixtures" / "shared"


@pytest.mark.parametrize("index", [" 1", "1\n", "\t1 \n"])
def test_a_platform_variable_is_stripped(index: str, tmp_path: Path) -> None:
    env = clean_env(read_env_file(SHARED / "volcano_env_3workers.env"))
    env.update(VC_TASK_INDEX=index, VK_TASK_INDEX=index, MALAUNCH_VOLCANO_DIR=str(tmp_path))
    result = run_cli(["topology", "--json", "--topology", "volcano"], env=env)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["node_rank"] == 1


@pytest.mark.parametrize(
    ("args", "env", "code", "line"),
    [
        (
            ["--nproc-per-node", " 7 "],
            {},
            64,
            "--nproc-per-node: ' 7 ': expected an integer from 1 to 10000",
        ),
        (
            [],
            {"MALAUNCH_NPROC_PER_NODE": "7\n"},
            64,
            "MALAUNCH_NPROC_PER_NODE: '7\\n': expected an integer from 1 to 10000",
        ),
        (
            [],
            {"CUDA_VISIBLE_DEVICES": "0, 1"},
            65,
            'CUDA_VISIBLE_DEVICES="0, 1": item 2 " 1" is not a device id (expected ascending '
            "integers without spaces, e.g. 0,1,2,3)",
        ),
    ],
)
def test_options_and_device_lists_are_taken_exactly(
    args: List[str], env: Dict[str, str], code: int, line: str, tmp_path: Path
) -> None:
    command = ["--framework", "torch_ddp", "--topology", "local", "--dry-run", *args]
    result = run_cli([*command, "--", "true"], env=clean_env(env), cwd=tmp_path)
    assert (result.code, result.stdout) == (code, "")
    assert result.stderr == f"malaunch: error: {line}\n"


def test_a_rank_table_field_is_taken_exactly(tmp_path: Path) -> None:
    table = json.loads((SHARED / "ranktable_v1_0_2nodes_8dev.json").read_text(encoding="utf-8"))
    table["server_list"][0]["device"][0]["rank_id"] = " 0"
    (tmp_path / "table.json").write_text(json.dumps(table))
    result = run_cli(["ranktable", "validate", "table.json"], cwd=tmp_path)
    assert (result.code, result.stdout) == (65, "")
    assert result.stderr == (
        "malaunch: error: rank table table.json: server_list[0].device[0].rank_id: expected a "
        'non-negative integer such as "0", got " 0"\n'
    )
