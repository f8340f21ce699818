"""The plugin API: everything a framework or topology-source plugin may import from the core.

Plugins (built-in and third-party) import the core only from here, from
:mod:`malaunch.testing` (their tests) and from :mod:`malaunch.context` (training scripts).
Everything else in ``malaunch`` is internal and may change between releases; what is listed
in ``__all__`` is the contract. See ``docs/plugins.md``.
"""

from __future__ import annotations

from malaunch.errors import (
    ExitCode,
    LaunchError,
    MalaunchError,
    MissingInputError,
    NotReadyError,
    PluginError,
    TopologyError,
    UsageError,
)
from malaunch.files import path_safe
from malaunch.hookspecs import hookimpl
from malaunch.models import (
    DataPaths,
    Device,
    Framework,
    LaunchPlan,
    Node,
    PlanOptions,
    ProcessSpec,
    ResolveOptions,
    Task,
    Topology,
    TopologySource,
    device_slots,
)
from malaunch.net import free_port
from malaunch.numbers import MAX_LOCAL_PROCESSES, MAX_NODES, MAX_WORLD_SIZE, check_world_size
from malaunch.params import Host, Integer, Seconds
from malaunch.python_command import PythonCommand, Target, is_python, parse_python_command
from malaunch.topology.data import parse_data_paths
from malaunch.topology.envparse import (
    format_host_port,
    get,
    job_id,
    parse_host,
    parse_host_ports,
    parse_hosts,
    parse_port,
    read_int,
    read_port,
)

__all__ = [
    "MAX_LOCAL_PROCESSES",
    "MAX_NODES",
    "MAX_WORLD_SIZE",
    "DataPaths",
    "Device",
    "ExitCode",
    "Framework",
    "Host",
    "Integer",
    "LaunchError",
    "LaunchPlan",
    "MalaunchError",
    "MissingInputError",
    "Node",
    "NotReadyError",
    "PlanOptions",
    "PluginError",
    "ProcessSpec",
    "PythonCommand",
    "ResolveOptions",
    "Seconds",
    "Target",
    "Task",
    "Topology",
    "TopologyError",
    "TopologySource",
    "UsageError",
    "check_world_size",
    "device_slots",
    "format_host_port",
    "free_port",
    "get",
    "hookimpl",
    "is_python",
    "job_id",
    "parse_data_paths",
    "parse_host",
    "parse_host_ports",
    "parse_hosts",
    "parse_port",
    "parse_python_command",
    "path_safe",
    "read_int",
    "read_port",
]
