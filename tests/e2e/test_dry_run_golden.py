"""Golden dry-run plans: the whole JSON of a handful of platform cases, byte for byte.

These pin what the launcher plans for real platform inputs, so a refactoring that moves code
around can show it changed nothing. Paths under the test's temporary directory are written as
``<tmp>``; nothing else is normalised. To accept a deliberate change, run the file with
``MALAUNCH_UPDATE_GOLDEN=1`` and review the diff of ``tests/fixtures/golden/``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

from malaunch.testing import clean_env, read_env_file, run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures"
SHARED = FIXTURES / "shared"
GOLDEN = FIXTURES / "golden"
POD = "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001-worker-{}"
COMMAND = ["python", "train.py", "--epochs", "1"]

Case = Callable[[Path], Tuple[str, Dict[str, str], List[str]]]


def _fixture_env(name: str, **extra: str) -> Dict[str, str]:
    env = clean_env(read_env_file(SHARED / name))
    # The image-level conda variables of the ModelArts fixture name an env absent here.
    for key in ("ANACONDA_DIR", "DEFAULT_CONDA_ENV_NAME"):
        env.pop(key, None)
    env.update(extra)
    return env


def modelarts_template2(tmp: Path) -> Tuple[str, Dict[str, str], List[str]]:
    config = tmp / "user-config"
    config.mkdir()
    shutil.copy(SHARED / "ranktable_template2_2pods_8dev.json", config / "jobstart_hccl.json")
    env = _fixture_env(
        "modelarts_ascend_env_example.env",
        RANK_TABLE_FILE=str(config),
        MA_MOUNT_PATH=str(tmp / "mount"),
        MA_CURRENT_INSTANCE_NAME=POD.format(1),
        MA_CURRENT_HOST_IP="192.0.2.22",
        VC_TASK_INDEX="1",
    )
    return "mindspore", env, []


def ascend_operator_table(tmp: Path) -> Tuple[str, Dict[str, str], List[str]]:
    table = tmp / "hccl.json"
    shutil.copy(FIXTURES / "rank_tables" / "v1_0_ascend_operator.json", table)
    env = clean_env({"RANK_TABLE_FILE": str(table), "XDL_IP": "203.0.113.52"})
    return "mindspore", env, []


def volcano(tmp: Path) -> Tuple[str, Dict[str, str], List[str]]:
    del tmp
    env = _fixture_env("volcano_env_3workers.env", MA_NUM_GPUS="2", VC_WORKER_PORT="29400")
    return "torch_ddp", env, []


def tf_ps(tmp: Path) -> Tuple[str, Dict[str, str], List[str]]:
    del tmp
    return "tensorflow_ps", _fixture_env("tf_ps_env_2ps_3workers.env"), []


def slurm(tmp: Path) -> Tuple[str, Dict[str, str], List[str]]:
    del tmp
    # One launcher per node (srun --ntasks-per-node=1): this is node03's only task.
    env = _fixture_env("slurm_env_example.env", SLURM_LOCALID="0")
    return "torch_ddp", env, ["--master-port", "29500"]


CASES: Dict[str, Case] = {
    "modelarts_template2": modelarts_template2,
    "ascend_operator_table": ascend_operator_table,
    "volcano": volcano,
    "tf_ps": tf_ps,
    "slurm": slurm,
}


def _normalised(value: Any, tmp: str) -> Any:
    if isinstance(value, str):
        return value.replace(tmp, "<tmp>")
    if isinstance(value, list):
        return [_normalised(item, tmp) for item in value]
    if isinstance(value, dict):
        return {key: _normalised(item, tmp) for key, item in value.items()}
    return value


@pytest.mark.parametrize("name", sorted(CASES))
def test_dry_run_matches_the_golden_plan(name: str, tmp_path: Path) -> None:
    framework, env, options = CASES[name](tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    args = ["--framework", framework, "--log-dir", str(tmp_path / "logs"), *options]
    result = run_cli([*args, "--dry-run", "--", *COMMAND], env=env, cwd=work)
    assert result.code == 0, result.stderr
    plan = _normalised(json.loads(result.stdout), str(tmp_path))
    golden = GOLDEN / f"{name}.json"
    text = json.dumps(plan, indent=2, sort_keys=True) + "\n"
    if os.environ.get("MALAUNCH_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")
