"""Test helpers for malaunch and its plugins (an opt-in pytest plugin).

Installed as the ``pytest11`` entry point ``malaunch``: it only defines helpers and
fixtures, so nothing changes for a test suite that does not use them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Union

import pytest

from malaunch.models import LaunchPlan, PlanOptions, Topology
from malaunch.plugins import PluginSet, load_plugins
from malaunch.testing_builders import make_ps_topology, make_rank_table_topology, make_topology
from malaunch.testing_checks import CONTRACT_KEYS, check_plan

__all__ = [
    "CONTRACT_KEYS",
    "CliResult",
    "PlanFactory",
    "check_plan",
    "clean_env",
    "make_plan",
    "make_ps_topology",
    "make_rank_table_topology",
    "make_topology",
    "malaunch_env",
    "malaunch_executable",
    "malaunch_plan",
    "pid_alive",
    "read_env_file",
    "read_summary",
    "run_cli",
    "wait_gone",
    "write_fake_distribution",
]

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


# --- Processes and summaries ------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process; a zombie (dead, not yet reaped) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]  # the name in parentheses may hold spaces
    return state not in ("Z", "X")


def wait_gone(pids: Sequence[int], timeout: float = 5.0) -> List[int]:
    """Wait until every pid has exited; return those still alive at the deadline.

    Orphans are reaped by init asynchronously, hence a bounded wait rather than one look.
    """
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if pid_alive(pid)]


def read_summary(log_dir: Path) -> Dict[str, Any]:
    """The ``malaunch-summary.json`` a launcher wrote in ``log_dir``."""
    loaded: Dict[str, Any] = json.loads((log_dir / "malaunch-summary.json").read_text())
    return loaded


# --- Planning through the installed plugins ----------------------------------------------


def make_plan(
    framework: str,
    topology: Topology,
    command: Sequence[str] = ("python", "train.py"),
    *,
    log_dir: Union[str, Path] = "/tmp/malaunch-test-logs",
    environ: Optional[Mapping[str, str]] = None,
    plugins: Optional[PluginSet] = None,
    check: bool = True,
    **framework_options: Any,
) -> LaunchPlan:
    """The named framework's plan, found through the installed plugins as the CLI finds it.

    ``framework_options`` are the values of the framework's own options by their Python name
    (``ms_mode="dynamic"``); ``environ`` is the launcher environment the plugin may read
    (default: empty). The plan is :func:`check_plan`-ed unless ``check=False``. Nothing is
    created on disk and core additions (``PYTHONUNBUFFERED``, ``--env``) are not applied.
    """
    loaded = plugins if plugins is not None else load_plugins(clean_env())
    options = PlanOptions(
        log_dir=str(log_dir),
        environ=dict(environ or {}),
        framework_options=framework_options,
    )
    plan = loaded.framework(framework).plan(topology, list(command), options)
    if check:
        check_plan(plan)
    return plan


class PlanFactory(Protocol):
    """The ``malaunch_plan`` fixture: ``(framework, topology, command, **kwargs) -> plan``."""

    def __call__(
        self,
        framework: str,
        topology: Topology,
        command: Sequence[str] = ...,
        **kwargs: Any,
    ) -> LaunchPlan: ...


# --- pytest fixtures ---------------------------------------------------------------------


@pytest.fixture
def malaunch_env() -> Dict[str, str]:
    """:func:`clean_env`: this environment without platform variables, for ``run_cli``."""
    return clean_env()


@pytest.fixture(scope="session")
def _malaunch_plugins() -> PluginSet:
    return load_plugins(clean_env())


@pytest.fixture
def malaunch_plan(_malaunch_plugins: PluginSet, tmp_path: Path) -> PlanFactory:
    """:func:`make_plan` with the installed plugins loaded once and logs under ``tmp_path``."""

    def factory(
        framework: str,
        topology: Topology,
        command: Sequence[str] = ("python", "train.py"),
        **kwargs: Any,
    ) -> LaunchPlan:
        kwargs.setdefault("log_dir", tmp_path / "logs")
        return make_plan(framework, topology, command, plugins=_malaunch_plugins, **kwargs)

    return factory


# --- Fake distributions ------------------------------------------------------------------


def write_fake_distribution(
    directory: Path,
    name: str,
    version: str,
    entry_points: Mapping[str, str],
    modules: Optional[Mapping[str, str]] = None,
) -> Path:
    """Write an installed-looking distribution into ``directory`` (which must be on sys.path).

    ``entry_points`` maps entry-point names of the ``malaunch`` group to ``module[:object]``;
    ``modules`` maps module names to their source. Put ``directory`` on ``PYTHONPATH`` of a
    :func:`run_cli` call (or ``monkeypatch.syspath_prepend`` it) and the real entry-point
    machinery finds the plugin, without pip. Returns the ``.dist-info`` directory.
    """
    info = directory / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    (info / "METADATA").write_text(metadata, encoding="utf-8")
    lines = "".join(f"{ep} = {target}\n" for ep, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[malaunch]\n{lines}", encoding="utf-8")
    for module, source in (modules or {}).items():
        (directory / f"{module}.py").write_text(source, encoding="utf-8")
    return info
