"""Test environments without the machine's platform variables (part of ``malaunch.testing``)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Mapping, Optional, Tuple

from malaunch.errors import PluginError
from malaunch.plugins import load_plugins
from malaunch.topology.platform_env import without_platform_vars

# Besides what platforms inject: the launcher's own option twins and per-process variables,
# the variables the installed frameworks declare as theirs (Framework.env_prefixes and
# launcher_vars: MS_, TF_, torchrun's, a plugin's PADDLE_), and machine settings that would
# change what the sources see.
TEST_PREFIXES = ("MALAUNCH_",)
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
    """This process's environment without platform variables and without the variables the
    installed frameworks declare as theirs, plus ``extra``."""
    prefixes, names = _frameworks_env()
    env = without_platform_vars(os.environ, (*TEST_PREFIXES, *prefixes), (*TEST_NAMES, *names))
    env.update(extra or {})
    return env


@functools.lru_cache(maxsize=1)
def _frameworks_env() -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """What the installed frameworks own, read once per process (loading the plugins takes
    milliseconds; tests call :func:`clean_env` often). A plugin that does not load owns
    nothing here: the launch under test reports it (exit 78)."""
    try:
        return load_plugins({}).owned_env()
    except PluginError:
        return (), ()


def read_env_file(path: Path) -> dict[str, str]:
    """Read a ``KEY=VALUE`` fixture: split at the first ``=``, ``#`` lines are comments."""
    result: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.partition("=")
        result[key.strip()] = value
    return result
