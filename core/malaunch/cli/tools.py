"""``malaunch plugins | topology | ranktable | simulate | render``: the commands besides
launching.

Commands only parse, call the core and render.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import click

from malaunch.cli.command import Group, about
from malaunch.cli.logs import logs_command
from malaunch.cli.report import report_command
from malaunch.models import Node, ResolveOptions, Topology
from malaunch.numbers import MAX_LOCAL_PROCESSES
from malaunch.params import Integer, Seconds, Text
from malaunch.params import Path as ParamPath
from malaunch.pipeline import AUTO, resolve_topology, warn_about_missing_data
from malaunch.plugins import Origin, PluginSet, load_plugins
from malaunch.topology.ranktable import generate, source
from malaunch.wording import noun_for, ranks


@click.group(
    cls=Group,
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "MALAUNCH"},
)
def tools() -> None:
    """malaunch's commands besides launching."""


tools.add_command(logs_command)
tools.add_command(report_command)


def plugin_rows(plugins: PluginSet) -> List[Dict[str, Any]]:
    entries: List[Tuple[str, str, Origin, str]] = [
        ("framework", name, reg.origin, reg.item.help)
        for name, reg in sorted(plugins.frameworks.items())
    ]
    entries += [
        ("topology", name, reg.origin, reg.item.help)
        for name, reg in sorted(plugins.sources.items())
    ]
    return [
        {
            "name": name,
            "kind": kind,
            "plugin": origin.plugin,
            "distribution": origin.distribution,
            "version": origin.version,
            "hooks": list(plugins.hooks.get(origin.plugin, ())),
            "help": help_text,
        }
        for kind, name, origin, help_text in entries
    ]


@tools.command("plugins")
@click.option(
    "--json",
    "as_json",
    envvar="MALAUNCH_PLUGINS_JSON",  # the twin is named after the option, not its parameter
    is_flag=True,
    help="Print JSON instead of a table.",
)
def plugins_command(as_json: bool) -> None:
    """Installed frameworks and topology sources, with package and version."""
    rows = plugin_rows(load_plugins(os.environ))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    header = ("NAME", "KIND", "DISTRIBUTION", "VERSION", "HOOKS")
    table = [header] + [
        (r["name"], r["kind"], r["distribution"], r["version"], ",".join(r["hooks"])) for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        click.echo("  ".join([*cells, row[-1]]).rstrip())


def render_topology(topology: Topology) -> str:
    """A short human summary of a topology."""
    lines = [
        f"source:      {topology.source}",
        f"job id:      {topology.job_id or '-'}",
        f"nodes:       {topology.nnodes} (this node: {topology.node_rank})",
        f"world size:  {topology.world_size}",
        f"master:      {topology.master_addr}:{topology.master_port or '-'}",
    ]
    if topology.rank_table_file:
        lines.append(f"rank table:  {topology.rank_table_file}")
    if topology.task:
        lines.append(f"task:        {topology.task.role} {topology.task.index}")
    for role, addresses in topology.roles.items():
        lines.append(f"{role + ':':<12} {', '.join(addresses)}")
    for node in topology.nodes:
        mark = "*" if node.index == topology.node_rank else " "
        lines.append(f" {mark} node {node.index}: {_node_line(node)}")
    data = topology.data
    for key in ("dataset", "cached_dataset", "result", "model"):
        value = getattr(data, key)
        if value:
            lines.append(f"{key + ':':<12} {value}")
    for name, path in data.dataset_map.items():
        lines.append(f"dataset_map: {name} -> {path}")
    return "\n".join(lines)


def _node_line(node: Node) -> str:
    """``worker-1.job [worker] ranks 4-7 on devices 0,1,2,3``: the pod name only where the
    host does not already say it (Kubeflow's host is the pod's name)."""
    named = node.name and node.name != node.host and not node.host.startswith(f"{node.name}.")
    label = f" {node.name}" if named else ""
    role = f" [{node.role}]" if node.role else ""
    devices = "no devices"
    if node.devices:
        ids = ",".join(str(d.device_id) for d in node.devices)
        where = f"{noun_for(len(node.devices), 'device')} {ids}"
        devices = f"{ranks([d.rank for d in node.devices])} on {where}"
    return f"{node.host}{label}{role} {devices}"


@tools.command("topology")
@click.option(
    "--topology",
    "source",
    envvar="MALAUNCH_TOPOLOGY_TOPOLOGY",  # named after the option, as every twin
    type=Text(),
    default=AUTO,
    show_default=True,
    metavar="SOURCE",
    help="Topology source: auto, or a name from `malaunch plugins`.",
)
@click.option(
    "--nproc-per-node",
    type=Integer(1, MAX_LOCAL_PROCESSES),
    help="Local processes where the source lists no devices.",
)
@click.option(
    "--wait-timeout",
    type=Seconds(),
    default=0.0,
    show_default=True,
    help="Seconds to wait for a rank table to become ready (0: look once).",
)
@click.option(
    "--log-dir",
    type=ParamPath(file_okay=False),
    help="Where a template-2 rank table's template-1 form is written when MA_MOUNT_PATH is "
    "not set [default: $MA_LOG_DIR or ./malaunch-logs]",
)
@click.option(
    "--json",
    "as_json",
    envvar="MALAUNCH_TOPOLOGY_JSON",
    is_flag=True,
    help="Print the topology as JSON.",
)
def topology_command(
    source: str,
    nproc_per_node: Optional[int],
    wait_timeout: float,
    log_dir: Optional[str],
    as_json: bool,
) -> None:
    """What the topology sources see in this environment."""
    plugins = load_plugins(os.environ)
    directory = Path(log_dir or os.environ.get("MA_LOG_DIR") or "malaunch-logs").absolute()
    options = ResolveOptions(
        nproc_per_node=nproc_per_node, wait_timeout=wait_timeout, log_dir=str(directory)
    )
    if source != AUTO:
        with about("--topology"):
            plugins.source(source)
    topology = resolve_topology(plugins, os.environ, source, options)
    warn_about_missing_data(topology)
    if as_json:
        click.echo(json.dumps(topology.model_dump(mode="json"), indent=2))
    else:
        click.echo(render_topology(topology))


@tools.group("ranktable")
def ranktable_group() -> None:
    """Check and convert HCCL rank tables."""


# Paths are click.Path(readable=False): click would refuse an unreadable file as a usage
# error (64); the commands read it themselves, and a permission error is 66 (SPEC §3).


@ranktable_group.command("validate")
@click.argument("path", metavar="FILE", type=ParamPath(readable=False, path_type=Path))
def ranktable_validate(path: Path) -> None:
    """Check FILE and print what it describes."""
    click.echo(source.describe_file(path))


@ranktable_group.command("convert")
@click.argument("source_file", metavar="SOURCE", type=ParamPath(readable=False, path_type=Path))
@click.argument("target", type=ParamPath(readable=False, path_type=Path))
def ranktable_convert(source_file: Path, target: Path) -> None:
    """Write the template-1 (v1.0) equivalent of SOURCE to TARGET."""
    click.echo(source.convert_file(source_file, target))


@ranktable_group.command("generate", short_help="Write this server's v1.0 rank table to OUT.")
@click.argument("out", type=ParamPath(readable=False, path_type=Path))
@click.option(
    "--devices",
    type=Text(),
    default="0-7",
    show_default=True,
    help="This server's NPUs: 0-7, 0,1,2,3 or [0,8).",
)
@click.option(
    "--server-id", type=Text(), help="Default: this host's IP, as hccl_tools.py finds it."
)
@click.option(
    "--hccn-conf",
    type=ParamPath(readable=False, path_type=Path),
    default="/etc/hccn.conf",
    show_default=True,
    help="The file that gives each NPU's address (address_<id>=...).",
)
def ranktable_generate(out: Path, devices: str, server_id: Optional[str], hccn_conf: Path) -> None:
    """Write this server's v1.0 rank table to OUT (what hccl_tools.py does)."""
    server = server_id if server_id is not None else generate.this_host_ip()
    click.echo(generate.generate_file(out, devices, server, hccn_conf))


@tools.command(
    "simulate",
    add_help_option=False,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def simulate_command(args: Tuple[str, ...]) -> int:
    """Run a multi-node job on this machine (see `malaunch simulate --help`)."""
    # The real parser needs the installed frameworks' options, so it is built there. Imported
    # here: it loads the supervisor, which the other tool commands never need (start-up cost).
    from malaunch.cli import simulate  # noqa: PLC0415 (start-up cost, see above)

    return simulate.main(args, os.environ)


@tools.command(
    "render",
    add_help_option=False,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def render_command(args: Tuple[str, ...]) -> int:
    """Print a job's Kubernetes manifests (see `malaunch render --help`)."""
    # As simulate: the parser needs the installed frameworks' options, so it is built there.
    from malaunch.cli import render  # noqa: PLC0415 (start-up cost, see simulate_command)

    return render.main(args, os.environ)
