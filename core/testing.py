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
import warnings
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

import pytest

from malaunch.models import Device, LaunchPlan, Node, PlanOptions, ProcessSpec, Task, Topology
from malaunch.plugins import PluginSet, load_plugins

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


# --- Topology builders -------------------------------------------------------------------
# Addresses are documentation ranges (RFC 5737): hosts 192.0.2.0/24, NPU IPs 198.51.100.0/24.


def _hosts(count: int) -> List[str]:
    return ["127.0.0.1"] if count == 1 else [f"192.0.2.{11 + i}" for i in range(count)]


def make_topology(
    nodes: int = 2,
    nproc_per_node: int = 2,
    node_rank: int = 0,
    source: str = "local",
    **overrides: Any,
) -> Topology:
    """A homogeneous cluster: ``nodes`` x ``nproc_per_node`` ranks numbered node by node.

    One node is ``127.0.0.1``; several are ``192.0.2.11``, ``192.0.2.12``, ...; the master is
    the first node and ``master_port`` is unset (pass ``master_port=...`` to set it). Any
    other :class:`~malaunch.models.Topology` field can be given in ``overrides``.
    """
    hosts = _hosts(nodes)
    built = [
        Node(
            index=n,
            host=host,
            devices=tuple(
                Device(rank=n * nproc_per_node + i, local_index=i, device_id=i)
                for i in range(nproc_per_node)
            ),
        )
        for n, host in enumerate(hosts)
    ]
    fields: Dict[str, Any] = {
        "source": source,
        "nodes": tuple(built),
        "node_rank": node_rank,
        "master_addr": hosts[0],
    }
    fields.update(overrides)
    return Topology(**fields)


def make_rank_table_topology(
    servers: int = 2,
    devices_per_server: int = 8,
    node_rank: int = 0,
    rank_table_file: str = "/home/ma-user/rank_table/jobstart_hccl.json",
    device_ids: Optional[Sequence[int]] = None,
    **overrides: Any,
) -> Topology:
    """What the ``ranktable`` source gives for a template-1 table.

    ``device_ids`` are the physical ids of each server in table order (default
    ``0..devices_per_server-1``); ranks are numbered server by server in that order, and each
    device's ``local_index`` is its position in the server's *ascending* id list.
    """
    ids = list(device_ids) if device_ids is not None else list(range(devices_per_server))
    ascending = sorted(ids)
    nodes = []
    for s in range(servers):
        devices = tuple(
            Device(
                rank=s * len(ids) + i,
                local_index=ascending.index(device_id),
                device_id=device_id,
                device_ip=f"198.51.100.{s * len(ids) + i + 1}",
            )
            for i, device_id in enumerate(ids)
        )
        nodes.append(Node(index=s, host=f"192.0.2.{11 + s}", devices=devices))
    fields: Dict[str, Any] = {
        "source": "ranktable",
        "nodes": tuple(nodes),
        "node_rank": node_rank,
        "master_addr": nodes[0].host,
        "rank_table_file": rank_table_file,
    }
    fields.update(overrides)
    return Topology(**fields)


def make_ps_topology(
    num_ps: int = 2,
    num_workers: int = 3,
    *,
    role: str = "worker",
    index: int = 0,
    num_chief: int = 0,
    port: int = 2222,
    job: str = "job-tf",
    **overrides: Any,
) -> Topology:
    """A parameter-server cluster as the ``tf-ps``/``tf-config`` sources describe it.

    One node per task (chief, ps, worker order) on ``<job>-<role>-<i>.<job>:<port>``;
    chief and worker nodes hold one rank each (chiefs first), ps nodes none; the task this
    container runs is ``role`` ``index``.
    """
    counts = {"chief": num_chief, "ps": num_ps, "worker": num_workers}
    roles = {
        name: tuple(f"{job}-{name}-{i}.{job}:{port}" for i in range(count))
        for name, count in counts.items()
        if count
    }
    nodes: List[Node] = []
    node_rank = None
    for name, addresses in roles.items():
        for i, address in enumerate(addresses):
            if (name, i) == (role, index):
                node_rank = len(nodes)
            devices: Tuple[Device, ...] = ()
            if name in ("chief", "worker"):
                rank = i + (num_chief if name == "worker" else 0)
                devices = (Device(rank=rank, local_index=0, device_id=0),)
            host = address.rsplit(":", 1)[0]
            pod = host.split(".", 1)[0]
            nodes.append(Node(index=len(nodes), host=host, name=pod, role=name, devices=devices))
    if node_rank is None:
        msg = f"make_ps_topology: task {role} {index} is not in {counts}"
        raise ValueError(msg)
    master = roles["chief"][0] if num_chief else roles["worker"][0]
    fields: Dict[str, Any] = {
        "source": "tf-ps",
        "nodes": tuple(nodes),
        "node_rank": node_rank,
        "master_addr": master.rsplit(":", 1)[0],
        "job_id": job,
        "roles": roles,
        "task": Task(role=role, index=index),
    }
    fields.update(overrides)
    return Topology(**fields)


# --- Plan invariants ---------------------------------------------------------------------

CONTRACT_KEYS = {
    "role", "rank", "local_rank", "argv", "env", "cwd", "log_file", "service", "dirs",
}  # fmt: skip


def _dense(values: Sequence[int], start: Optional[int] = None) -> bool:
    """Distinct consecutive integers (from ``start`` when given)."""
    ordered = sorted(values)
    first = ordered[0] if start is None else start
    return ordered == list(range(first, first + len(ordered)))


def _process_problems(index: int, spec: ProcessSpec) -> List[str]:
    where = f"processes[{index}] ({spec.role} rank {spec.rank})"
    problems = []
    if not spec.role:
        problems.append(f"{where}: empty role")
    if not spec.argv or not all(isinstance(a, str) for a in spec.argv) or not spec.argv[0]:
        problems.append(f"{where}: argv must be a non-empty list of str, got {spec.argv!r}")
    for key, value in spec.env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            problems.append(f"{where}: env key {key!r} is not a variable name")
        if not isinstance(value, str) or "\0" in value:
            problems.append(f"{where}: env[{key!r}] must be a str without NUL, got {value!r}")
    for field in ("cwd", "log_file"):
        path = getattr(spec, field)
        if not os.path.isabs(path):
            problems.append(f"{where}: {field} {path!r} is not absolute")
    if spec.rank is not None and spec.rank < 0:
        problems.append(f"{where}: negative rank")
    return problems


def _group_problems(plan: LaunchPlan) -> List[str]:
    processes = plan.processes
    workers = [p for p in processes if not p.service]
    problems = []
    logs = [p.log_file for p in processes]
    if len(set(logs)) != len(logs):
        problems.append(f"log files are not distinct: {logs}")
    ranks = [p.rank for p in processes if p.rank is not None]
    if len(set(ranks)) != len(ranks):
        problems.append(f"ranks are not unique: {ranks}")
    worker_ranks = [p.rank for p in workers if p.rank is not None]
    if worker_ranks and not _dense(worker_ranks):
        problems.append(f"worker ranks are not dense (consecutive): {sorted(worker_ranks)}")
    local = [p.local_rank for p in workers if p.local_rank is not None]
    if local and not _dense(local, start=0):
        problems.append(f"worker local ranks are not 0..{len(local) - 1}: {sorted(local)}")
    if processes and not workers:
        problems.append("every process is a service: nothing would ever finish")
    identities = [(p.role, p.rank, p.local_rank) for p in processes if p.service]
    if len(set(identities)) != len(identities):
        problems.append(f"services are not distinct by role/rank/local rank: {identities}")
    return problems


def _json_problems(plan: LaunchPlan) -> List[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dumped = plan.to_json_dict()
    if caught:  # pydantic warns (and guesses) when a field holds the wrong type
        return [f"the plan does not serialise cleanly: {caught[0].message}"]
    problems = []
    if set(dumped) != {"framework", "topology", "processes"}:
        problems.append(f"plan JSON keys {sorted(dumped)} differ from the dry-run contract")
    for i, process in enumerate(dumped["processes"]):
        if set(process) != CONTRACT_KEYS:
            problems.append(f"processes[{i}] JSON keys {sorted(process)} differ from the contract")
    again = LaunchPlan.model_validate_json(json.dumps(dumped))
    if again != plan:
        problems.append("the plan does not survive a JSON dump and reload unchanged")
    return problems


def check_plan(plan: LaunchPlan) -> None:
    """Assert what every framework plugin's plan must satisfy; any plugin's tests can call it.

    Checked: at least one process and at least one non-service process; roles set; argv a
    non-empty list of str; env keys are variable names and values str; cwd and log files
    absolute, log files distinct; ranks unique (services included), worker ranks consecutive,
    worker local ranks ``0..n-1``; services distinct by (role, rank, local rank); the plan's
    JSON has exactly the dry-run contract's keys and reloads to an equal plan.

    :raises AssertionError: listing every problem found.
    """
    problems = [] if plan.framework else ["empty framework name"]
    if not plan.processes:
        problems.append("the plan has no processes")
    for index, spec in enumerate(plan.processes):
        problems.extend(_process_problems(index, spec))
    problems.extend(_group_problems(plan))
    problems.extend(_json_problems(plan))
    if problems:
        lines = "\n  ".join(problems)
        msg = (
            f"plan of framework {plan.framework!r} breaks {len(problems)} invariant(s):\n  {lines}"
        )
        raise AssertionError(msg)


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
