"""--conda-env / DEFAULT_CONDA_ENV_NAME through the installed CLI, with a real interpreter in a
conda-layout directory (a virtualenv made by the test): the child proves which python ran."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from malaunch.testing import clean_env, read_summary, run_cli

PROBE = "import sys, os; print('probe', sys.prefix, os.environ['PATH'].split(':')[0])"


@pytest.fixture(scope="module")
def conda_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<root>/envs/demo``: a virtualenv of this interpreter (its own sys.prefix, bin, lib)."""
    root = tmp_path_factory.mktemp("anaconda3")
    prefix = root / "envs" / "demo"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120
    )
    assert (prefix / "bin" / "python").exists() and (prefix / "lib").is_dir()
    return root


def launch(args: List[str], env: Dict[str, str], cwd: Path) -> Dict[int, str]:
    """Run a torch_ddp local launch; return each rank's log text."""
    log_dir = cwd / "logs"
    result = run_cli(
        ["--framework", "torch_ddp", "--topology", "local", "--log-dir", str(log_dir), *args],
        env=env,
        cwd=cwd,
    )
    assert result.code == 0, result.stderr
    summary = read_summary(log_dir)
    return {
        entry["rank"]: Path(entry["log_file"]).read_text(encoding="utf-8")
        for entry in summary["processes"]
    }


def probe_lines(logs: Dict[int, str]) -> Dict[int, List[str]]:
    return {
        rank: next(line for line in text.splitlines() if line.startswith("probe")).split()[1:]
        for rank, text in logs.items()
    }


def test_named_env_runs_its_interpreter(conda_root: Path, tmp_path: Path) -> None:
    prefix = conda_root / "envs" / "demo"
    env = clean_env({"ANACONDA_DIR": str(conda_root)})
    logs = launch(
        ["--nproc-per-node", "2", "--conda-env", "demo", "--", "python", "-c", PROBE], env, tmp_path
    )
    assert probe_lines(logs) == {
        0: [str(prefix), f"{prefix}/bin"],
        1: [str(prefix), f"{prefix}/bin"],
    }


def test_image_default_env_without_the_option(conda_root: Path, tmp_path: Path) -> None:
    prefix = conda_root / "envs" / "demo"
    env = clean_env({"ANACONDA_DIR": str(conda_root), "DEFAULT_CONDA_ENV_NAME": "demo"})
    logs = launch(["--", "python3", "-c", PROBE], env, tmp_path)
    assert probe_lines(logs) == {0: [str(prefix), f"{prefix}/bin"]}


def test_env_directory_as_path(conda_root: Path, tmp_path: Path) -> None:
    prefix = conda_root / "envs" / "demo"
    logs = launch(["--conda-env", str(prefix), "--", "python", "-c", PROBE], clean_env(), tmp_path)
    assert probe_lines(logs) == {0: [str(prefix), f"{prefix}/bin"]}


def test_dry_run_shows_argv_and_env(conda_root: Path, tmp_path: Path) -> None:
    prefix = conda_root / "envs" / "demo"
    env = clean_env({"ANACONDA_DIR": str(conda_root), "LD_LIBRARY_PATH": "/opt/lib"})
    result = run_cli(
        ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2",
         "--conda-env", "demo", "--dry-run", "--", "python", "train.py"],
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    for process in json.loads(result.stdout)["processes"]:
        assert process["argv"] == [str(prefix / "bin" / "python"), "train.py"]
        assert process["env"]["PATH"].split(":")[0] == f"{prefix}/bin"
        assert process["env"]["LD_LIBRARY_PATH"] == f"{prefix}/lib:/opt/lib"
        assert process["env"]["CONDA_PREFIX"] == str(prefix)
        assert process["env"]["CONDA_DEFAULT_ENV"] == "demo"


def test_delegate_mode_agent_runs_the_env_interpreter(conda_root: Path, tmp_path: Path) -> None:
    prefix = conda_root / "envs" / "demo"
    result = run_cli(
        ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2",
         "--torch-mode", "delegate", "--conda-env", "demo", "--dry-run", "--", "python", "t.py"],
        env=clean_env({"ANACONDA_DIR": str(conda_root)}), cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    (process,) = json.loads(result.stdout)["processes"]
    assert process["argv"][:3] == [str(prefix / "bin" / "python"), "-m", "torch.distributed.run"]


def test_missing_env_exits_66_naming_the_path(conda_root: Path, tmp_path: Path) -> None:
    env = clean_env({"ANACONDA_DIR": str(conda_root), "HOME": str(tmp_path)})
    result = run_cli(
        ["--framework", "torch_ddp", "--topology", "local", "--conda-env", "nope",
         "--", "python", "-c", "print(1)"],
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 66
    assert str(conda_root / "envs" / "nope") in result.stderr
    assert "--conda-env" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_default_env_names_the_variable(tmp_path: Path) -> None:
    env = clean_env({"ANACONDA_DIR": str(tmp_path), "DEFAULT_CONDA_ENV_NAME": "gone"})
    result = run_cli(
        ["--framework", "torch_ddp", "--topology", "local", "--", "python", "-c", "print(1)"],
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 66
    assert str(tmp_path / "envs" / "gone") in result.stderr
    assert "DEFAULT_CONDA_ENV_NAME" in result.stderr
