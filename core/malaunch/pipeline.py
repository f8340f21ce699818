"""The pipeline as plain functions: environment -> Topology -> LaunchPlan.

The CLI reads ``os.environ`` and the command line, then calls these; tests call them directly
with an explicit environment. The last arrow, LaunchPlan -> exit code, is
:mod:`malaunch.supervisor`.
"""

from __future__ import annotations

from functools import partial
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.cpus.bind import CpuBinder
from malaunch.errors import PluginError, TopologyError
from malaunch.guard import call_plugin, check_plan
from malaunch.log import MAX_REPEATS, logger, shown
from malaunch.models import (
    DataPaths,
    LaunchPlan,
    PlanOptions,
    ProcessSpec,
    ResolveOptions,
    Topology,
    TopologySource,
)
from malaunch.plugins import Origin, PluginSet
from malaunch.process_env.conda import apply_conda
from malaunch.process_env.context_var import context_env
from malaunch.topology import signs
from malaunch.topology.data import missing_paths, parse_data_paths

AUTO = "auto"


def resolve_topology(
    plugins: PluginSet, environ: Mapping[str, str], source: str, options: ResolveOptions
) -> Topology:
    """Resolve with the named source, or with the first ``auto`` source whose input exists.

    ``auto`` never runs a job silently alone (:mod:`malaunch.topology.signs`): inside another
    launcher's worker, or where only the ``local`` fallback matched an environment that shows
    a distributed job, it refuses; a named source, ``local`` included, is taken as meant.
    """
    if source != AUTO:
        return _with_data(_resolve(plugins, plugins.source(source), environ, options), environ)
    signs.check_not_nested(environ, plugins.launcher_vars())
    for candidate in plugins.auto_sources():
        detect = candidate.detect
        assert detect is not None  # auto_sources() keeps only detectable ones
        what, origin = f"topology source {candidate.name!r}", _origin(plugins, candidate.name)
        if call_plugin(what, origin, partial(detect, environ)):
            if candidate.name == signs.FALLBACK_SOURCE:
                signs.refuse_alone(environ)
            return _with_data(_resolve(plugins, candidate, environ, options), environ)
    msg = "no topology source matched this environment (is the local source disabled?)"
    raise TopologyError(msg)


def _resolve(
    plugins: PluginSet, source: TopologySource, environ: Mapping[str, str], options: ResolveOptions
) -> Topology:
    what, origin = f"topology source {source.name!r}", _origin(plugins, source.name)
    return call_plugin(what, origin, lambda: source.resolve(environ, options))


def _origin(plugins: PluginSet, source: str) -> Optional[Origin]:
    registered = plugins.sources.get(source)
    return registered.origin if registered is not None else None


def _with_data(topology: Topology, environ: Mapping[str, str]) -> Topology:
    """Data paths come from the same variables whatever the source, so a source (a
    third-party one too) that leaves them empty gets them here."""
    if topology.data != DataPaths():
        return topology
    return topology.model_copy(update={"data": parse_data_paths(environ)})


def warn_about_missing_data(topology: Topology) -> None:
    """Data paths the platform named but this machine lacks: a warning, not an error, since a
    script may create or mount them itself. A few are named, the rest counted: a DATASET_MAP
    of thousands of entries must not bury the launcher's other messages."""
    missing = missing_paths(topology.data)
    for path in missing[:MAX_REPEATS]:
        logger.warning(f"data path does not exist here: {shown(path)}")
    if len(missing) > MAX_REPEATS:
        more = len(missing) - MAX_REPEATS
        logger.warning(f"... and {more} more data paths that do not exist here")


def override_master(
    topology: Topology, master_addr: Optional[str], master_port: Optional[int]
) -> Topology:
    """Apply ``--master-addr`` / ``--master-port`` on top of what the source resolved."""
    update: Dict[str, object] = {}
    if master_addr:
        update["master_addr"] = master_addr
    if master_port is not None:
        update["master_port"] = master_port
    return topology.model_copy(update=update) if update else topology


def move_nodes(topology: Topology, hosts: Mapping[int, str]) -> Topology:
    """Replaced nodes at the addresses they came from (SPEC §9 "Replacement"): the host list,
    the rendezvous address where such a node held it, and the ``host:port`` entries of a
    parameter-server cluster follow them."""
    moved = {index: host for index, host in hosts.items() if 0 <= index < topology.nnodes}
    moved = {i: h for i, h in moved.items() if topology.nodes[i].host != h}
    if not moved:
        return topology
    old = {topology.nodes[index].host: host for index, host in moved.items()}
    nodes = tuple(
        node.model_copy(update={"host": moved[node.index]}) if node.index in moved else node
        for node in topology.nodes
    )
    roles = {
        role: tuple(_moved_address(entry, old) for entry in entries)
        for role, entries in topology.roles.items()
    }
    master = old.get(topology.master_addr, topology.master_addr)
    return topology.model_copy(update={"nodes": nodes, "roles": roles, "master_addr": master})


def _moved_address(entry: str, old: Mapping[str, str]) -> str:
    host, sep, port = entry.rpartition(":")
    return f"{old[host]}{sep}{port}" if sep and host in old else entry


def finalize_plan(
    plan: LaunchPlan,
    environ: Mapping[str, str],
    extra_env: Mapping[str, str],
    conda_env: Optional[str] = None,
) -> LaunchPlan:
    """Apply what every framework gets: the conda env, ``MALAUNCH_CONTEXT``, unbuffered
    output and the user's ``--env`` values.

    ``--env`` wins over what a plugin set, because the user asked for it explicitly.
    """
    plan = apply_conda(plan, environ, conda_env)
    processes: List[ProcessSpec] = []
    for spec in plan.processes:
        env = {**spec.env, **extra_env}
        # The context describes the env the process really gets (``--env`` included); an
        # explicit ``--env MALAUNCH_CONTEXT=...`` still wins.
        context = context_env(plan.topology, spec.model_copy(update={"env": env}), plan.framework)
        env = {**context, **env}
        if "PYTHONUNBUFFERED" not in environ and "PYTHONUNBUFFERED" not in env:
            env["PYTHONUNBUFFERED"] = "1"
        processes.append(spec.model_copy(update={"env": env}))
    return plan.model_copy(update={"processes": tuple(processes)})


def locate(
    plugins: PluginSet,
    environ: Mapping[str, str],
    source: str,
    resolve_options: ResolveOptions,
    master: Tuple[Optional[str], Optional[int]] = (None, None),
    *,
    hosts: Optional[Mapping[int, str]] = None,
) -> Topology:
    """The topology of one launch attempt: the source's, with ``--master-addr`` and
    ``--master-port`` on top, and replaced nodes at the addresses they came from (``hosts``,
    as node 0 tells them on a restart)."""
    topology = resolve_topology(plugins, environ, source, resolve_options)
    return move_nodes(override_master(topology, *master), hosts or {})


def plan_topology(
    plugins: PluginSet,
    environ: Mapping[str, str],
    topology: Topology,
    *,
    framework: str,
    command: Sequence[str],
    plan_options: PlanOptions,
    extra_env: Optional[Mapping[str, str]] = None,
    conda_env: Optional[str] = None,
    cpus: Optional[CpuBinder] = None,
) -> LaunchPlan:
    """The framework's plan of ``topology`` with what the core adds; ``cpus`` binds each
    process to CPUs (``--cpu-bind``, :mod:`malaunch.cpus`). The framework's options left out
    of ``plan_options`` reach the plugin at their declared defaults."""
    chosen = plugins.framework(framework)
    values = chosen.option_values(plan_options.framework_options)
    options = plan_options.model_copy(update={"framework_options": values})
    what = f"framework {framework!r}"
    registered = plugins.frameworks.get(framework)
    origin = registered.origin if registered is not None else None
    planned = call_plugin(what, origin, lambda: chosen.plan(topology, list(command), options))
    plan = check_plan(planned, what, origin)
    if not plan.processes:
        # Launching nothing would "succeed" with exit 0 and hide a broken plugin or topology.
        msg = (
            f"framework {framework!r} planned no process for node {topology.node_rank} "
            f"of topology source {topology.source!r}"
        )
        raise PluginError(msg)
    plan = finalize_plan(plan, environ, extra_env or {}, conda_env)
    return cpus.bind(plan) if cpus is not None else plan


def build_plan(
    plugins: PluginSet,
    environ: Mapping[str, str],
    *,
    framework: str,
    source: str,
    command: Sequence[str],
    resolve_options: ResolveOptions,
    plan_options: PlanOptions,
    master: Tuple[Optional[str], Optional[int]] = (None, None),
    extra_env: Optional[Mapping[str, str]] = None,
    conda_env: Optional[str] = None,
    hosts: Optional[Mapping[int, str]] = None,
    cpus: Optional[CpuBinder] = None,
) -> LaunchPlan:
    """The whole left half of the pipeline, for one launch attempt: :func:`locate`, then
    :func:`plan_topology`; ``hosts``: the addresses replaced nodes came from, as node 0 tells
    them."""
    plugins.framework(framework)  # an unknown framework before any topology work
    topology = locate(plugins, environ, source, resolve_options, master, hosts=hosts)
    return plan_topology(
        plugins,
        environ,
        topology,
        framework=framework,
        command=command,
        plan_options=plan_options,
        extra_env=extra_env,
        conda_env=conda_env,
        cpus=cpus,
    )
