"""Test environments without the machine's platform variables (part of ``malaunch.testing``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional

from malaunch.topology.platform_env import without_platform_vars

# Besides what platforms inject: the launcher's own option twins and per-process variables,
# framework variables, and machine settings that would change what the sources see.
TEST_PREFIXES = ("MALAUNCH_", "TF_", "MS_")
TEST_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "ASCEND_RT_VISIBLE_DEVICES",
    "ANACONDA_DIR",
    "DEFAULT_CONDA_ENV_NAME",
    "HCCL_CONNECT_TIMEOUT",
    "ASCEND_PROCESS_LOG_PATH",
    "OMP_NUM_THREADS",
    "PYTHONUNBUFFERED",
)


def clean_env(extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """This process's environment without platform variables, plus ``extra``."""
    env = without_platform_vars(os.environ, TEST_PREFIXES, TEST_NAMES)
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
