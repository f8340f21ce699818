"""Test helpers for malaunch and its plugins (an opt-in pytest plugin).

Installed as the ``pytest11`` entry point ``malaunch``: it only defines helpers and
fixtures, so nothing changes for a test suite that does not use them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

# Variables a platform injects; a test environment starts without them so that the machine
# running the tests cannot leak into what the resolvers see.
PLATFORM_PREFIXES = ("MA_", "VC_", "VK_", "TF_", "MS_", "RANK_TABLE_FILE", "MALAUNCH_", "DLS_")
PLATFORM_NAMES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "ASCEND_RT_VISIBLE_DEVICES",
    "ASCEND_VISIBLE_DEVICES",
    "DATASET",
    "DATASET_MAP",
    "CACHED_DATASET",
    "RESULT",
    "MODEL",
    "ANACONDA_DIR",
    "DEFAULT_CONDA_ENV_NAME",
    "RANK_ID",
    "RANK_SIZE",
    "DEVICE_ID",
    "ASCEND_DEVICE_ID",
    "JOB_ID",
    "BATCH_JOB_ID",
    "HCCL_CONNECT_TIMEOUT",
    "ASCEND_PROCESS_LOG_PATH",
    "OMP_NUM_THREADS",
    "PYTHONUNBUFFERED",
)


def clean_env(extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """This process's environment without platform variables, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(PLATFORM_PREFIXES) and key not in PLATFORM_NAMES
    }
    env.update(extra or {})
    return env


def read_env_file(path: Path) -> dict[str, str]:
    """Read a ``KEY=VALUE`` fixture: split at the first ``=``, ``#`` lines are comments."""
    result: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.partition("=")
        result[key.strip()] = value
    return result


def malaunch_executable() -> str:
    """The installed ``malaunch`` next to the running interpreter (a virtualenv's bin)."""
    beside = Path(sys.executable).with_name("malaunch")
    if beside.exists():
        return str(beside)
    found = shutil.which("malaunch")
    if found is None:
        msg = "the malaunch command is not installed"
        raise RuntimeError(msg)
    return found


@dataclasses.dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(
    args: Sequence[str],
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[Path] = None,
    timeout: float = 60.0,
) -> CliResult:
    """Run the installed ``malaunch`` with ``args`` in ``env`` (default: :func:`clean_env`)."""
    proc = subprocess.run(
        [malaunch_executable(), *args],
        env=dict(env) if env is not None else clean_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)
