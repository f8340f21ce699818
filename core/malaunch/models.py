"""Data models of the launch pipeline: ``Topology`` -> ``LaunchPlan`` of ``ProcessSpec``.

Models are frozen and do no I/O, so every arrow of the pipeline is a pure function a test can
call. ``Optional``/``Dict``/``Tuple`` spellings are kept because pydantic evaluates annotations
at runtime and the package supports Python 3.9.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import click
from pydantic import BaseModel, ConfigDict, Field


class FrozenModel(BaseModel):
    """Immutable, strict-about-extras base for every model."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Device(FrozenModel):
    """One accelerator, or one process slot where the source lists no real devices."""

    rank: int = Field(description="global rank of the process that owns this device")
    local_index: int = Field(
        description="in-container index: position in this node's ascending device list"
    )
    device_id: int = Field(description="physical id (rank table device_id, visible device id)")
    device_ip: Optional[str] = None


def device_slots(first_rank: int, device_ids: Sequence[int]) -> Tuple[Device, ...]:
    """The devices of a node whose ranks start at ``first_rank``, one per id, in order; the
    in-container index is the position (as for a visible-devices list or plain slots)."""
    return tuple(
        Device(rank=first_rank + local, local_index=local, device_id=device_id)
        for local, device_id in enumerate(device_ids)
    )


class Node(FrozenModel):
    """One host, pod or container of the job."""

    index: int = Field(description="node rank, 0-based, in the order ranks are numbered")
    host: str = Field(description="address peers reach this node at (IP or DNS name)")
    name: Optional[str] = Field(default=None, description="pod or instance name when known")
    role: Optional[str] = Field(default=None, description="task role (ps, worker, ...) if any")
    devices: Tuple[Device, ...] = Field(
        default=(),
        description="its devices, in rank order from every built-in source (a plan reads this "
        "node's through Topology.local_devices, which sorts them anyway)",
    )


class Task(FrozenModel):
    """The parameter-server task this container runs (TF PS style sources)."""

    role: str
    index: int


class DataPaths(FrozenModel):
    """Data locations a platform passes to the job (Octopus / ModelArts variables)."""

    dataset: Optional[str] = None
    dataset_map: Dict[str, str] = Field(default_factory=dict)
    cached_dataset: Optional[str] = None
    result: Optional[str] = None
    model: Optional[str] = None


class Topology(FrozenModel):
    """The cluster as the platform describes it, seen from this node."""

    source: str = Field(description="name of the topology source that produced it")
    nodes: Tuple[Node, ...] = Field(
        description="every node of the job in node-rank order (nodes[i].index == i); nodes[0] "
        "hosts the rendezvous and the job channel"
    )
    node_rank: int = Field(description="index of this node in ``nodes``")
    master_addr: str
    master_port: Optional[int] = None
    job_id: Optional[str] = None
    rank_table_file: Optional[str] = Field(
        default=None, description="template-1 (v1.0) rank table the processes receive"
    )
    roles: Dict[str, Tuple[str, ...]] = Field(
        default_factory=dict, description="PS-style cluster: role -> ordered host:port list"
    )
    task: Optional[Task] = None
    data: DataPaths = Field(default_factory=DataPaths)
    peers_reachable: bool = Field(
        default=True,
        description="whether node launchers can reach node 0's launcher at nodes[0].host; "
        "False where nodes[0].host is a placeholder, not an address the other nodes dial, "
        "which leaves the job channel off (other nodes' placeholders do not matter)",
    )

    @property
    def this_node(self) -> Node:
        """``nodes[node_rank]``: this node."""
        return self.nodes[self.node_rank]

    @property
    def local_devices(self) -> Tuple[Device, ...]:
        """This node's devices in rank order: one process each, local rank = position."""
        return tuple(sorted(self.this_node.devices, key=lambda device: device.rank))

    @property
    def nnodes(self) -> int:
        """Every node of the job, those without devices (parameter servers) included."""
        return len(self.nodes)

    @property
    def world_size(self) -> int:
        """Processes across the job: every listed device of every node."""
        return sum(len(node.devices) for node in self.nodes)


class ProcessSpec(FrozenModel):
    """One local process of a plan."""

    role: str
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    argv: Tuple[str, ...]
    env: Dict[str, str] = Field(
        default_factory=dict, description="only the variables the plan sets or changes"
    )
    cwd: str
    log_file: str
    service: bool = Field(
        default=False, description="runs until the workers finish (ps, scheduler)"
    )
    dirs: Tuple[str, ...] = Field(
        default=(),
        description="directories the launcher creates before starting it (plans do no I/O)",
    )
    attempt_env: Tuple[str, ...] = Field(
        default=(),
        description="variables the launcher sets to the attempt number (0, then 1, 2, ... "
        "after restarts) at each start, as it sets MALAUNCH_RESTART_COUNT",
    )
    error_file: Optional[str] = Field(
        default=None,
        description="where the process may write its structured error (torchelastic's "
        "error file, as @record writes it): removed before each start, read into the "
        "summary when the process fails",
    )
    cpus: Optional[str] = Field(
        default=None,
        description="CPUs it is bound to between fork and exec, a Linux CPU list such as "
        "0-23,48-71 (--cpu-bind sets it; a plugin leaves it None); None: not bound",
    )


class LaunchPlan(FrozenModel):
    """What this launcher will start on this node."""

    framework: str
    topology: Topology
    processes: Tuple[ProcessSpec, ...]

    def to_json_dict(self) -> Dict[str, Any]:
        """The dry-run JSON contract of SPEC §3."""
        return self.model_dump(mode="json")


class ResolveOptions(FrozenModel):
    """What the command line tells a topology source."""

    nproc_per_node: Optional[int] = None
    wait_timeout: float = 600.0
    poll_interval: float = 0.2
    log_dir: str = "malaunch-logs"
    hostnames: Optional[Tuple[str, ...]] = Field(
        default=None,
        description="this machine's names and addresses for matching servers; None: look up",
    )


class PlanOptions(FrozenModel):
    """What the command line tells a framework plugin."""

    log_dir: str
    cwd: str = Field(
        description="the launch directory, absolute: processes run there unless the plan says "
        "otherwise, and relative paths (log dir, the command's script) are relative to it",
    )
    environ: Dict[str, str] = Field(
        default_factory=dict, description="the launcher's environment, read-only for plugins"
    )
    framework_options: Dict[str, Any] = Field(
        default_factory=dict, description="values of the options the framework contributed"
    )
    max_restarts: int = Field(
        default=0, description="--max-restarts: how many times the job may be restarted"
    )
    job_port: Optional[int] = Field(
        default=None,
        description="the port node 0's launcher serves the job channel on (docs/job.md), the "
        "same on every node; None when the job has no channel (one node, --no-job-channel)",
    )


# Registration objects hold callables, so they are frozen dataclasses rather than pydantic
# models; they never go into JSON.

ResolveFn = Callable[[Mapping[str, str], ResolveOptions], Topology]
DetectFn = Callable[[Mapping[str, str]], bool]
PlanFn = Callable[[Topology, Sequence[str], PlanOptions], LaunchPlan]


@dataclasses.dataclass(frozen=True)
class TopologySource:
    """A named way of turning the platform's environment into a :class:`Topology`.

    ``detect`` answers "does this platform's input exist here?" for ``--topology auto``;
    sources without one are only used when named. ``auto_order`` sorts the sources ``auto``
    tries (lower first; the built-ins' orders are in ``docs/plugins.md``, 1000 for ``local``).
    """

    name: str
    resolve: ResolveFn
    detect: Optional[DetectFn] = None
    auto_order: int = 500
    help: str = ""


@dataclasses.dataclass(frozen=True)
class Framework:
    """A named framework plugin: maps a topology and the user's command to a plan.

    ``options`` are click options the framework adds to the launch command; their values
    reach ``plan`` through ``PlanOptions.framework_options`` under the option's ``name``.

    ``launcher_vars`` are the variables the framework's own launcher (``launcher``, a name for
    messages such as ``torchrun``) gives every worker it starts: where one is set,
    ``--topology auto`` refuses to start a job inside that worker (exit 65), naming the
    framework. ``env_prefixes`` are the prefixes of the variables the framework owns
    (``PADDLE_``): the test kit's ``clean_env`` removes them, and ``launcher_vars``, so that a
    developer's shell does not leak into a plugin's tests.
    """

    name: str
    plan: PlanFn
    options: Sequence[click.Option] = ()
    help: str = ""
    launcher: str = ""
    launcher_vars: Sequence[str] = ()
    env_prefixes: Sequence[str] = ()

    def option_values(self, given: Mapping[str, Any]) -> Dict[str, Any]:
        """``given`` (option values by Python name) plus every option of the framework that
        is not in it, at the value the launch command gives it when the command line and the
        environment leave it out: the option's default, converted by its type and passed
        through its callback, as click does. So a plugin states each default once.

        :raises TypeError: for a required option without a default that is not given.
        """
        values = dict(given)
        missing: List[click.Parameter] = [
            copy.copy(option)
            for option in self.options
            if option.name and option.expose_value and option.name not in values
        ]
        if not missing:
            return values
        command = click.Command(self.name, params=missing, add_help_option=False)
        try:
            context = command.make_context(self.name, [])
        except click.ClickException as exc:
            msg = f"framework {self.name!r}: {exc.format_message()}"
            raise TypeError(msg) from exc
        values.update(context.params)
        return values

    def launched_by(self) -> str:
        """Who starts a worker that has one of ``launcher_vars``, for messages."""
        if self.launcher:
            return f"{self.launcher} worker (framework {self.name})"
        return f"worker of framework {self.name}'s launcher"
