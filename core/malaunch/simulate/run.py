"""Running a simulation: one ``malaunch`` per simulated node, started as the platform would.

The parent only starts the node launchers, relays their output (``[node k]``), forwards
signals to them and collects their exit codes: the node launchers stop, finish and restart
together through their own job channel, exactly as on a cluster. A safety net stops a node
launcher that has not ended by itself well after the first one did, and reports that as a
failure. The exit code is the first failing node's own (a node stopped for another's failure
exits 75, so a node with a failure of its own takes precedence), and ``malaunch-summary.json``
has one row per node. The ModelArts rank-table writer (the platform side) is a service.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import click

from malaunch.log import logger
from malaunch.models import LaunchPlan, Node, ProcessSpec, Topology
from malaunch.net import free_port
from malaunch.simulate.platforms import (
    INITIALIZING,
    JobShape,
    SimCluster,
    SimNode,
    fabricate,
)
from malaunch.simulate.printenv import LAUNCHER_SET, render_env
from malaunch.simulate.ranktable_writer import write_json
from malaunch.supervisor.runlog import load_json_object
from malaunch.supervisor.runs import RunFolder
from malaunch.supervisor.signals import parse_signal_names
from malaunch.supervisor.supervise import SuperviseOptions, supervise
from malaunch.supervisor.tail import MAX_LINE, Tail, own_log
from malaunch.topology.platform_env import without_platform_vars

# Node launchers need their own grace period to stop their workers before we SIGKILL them.
NODE_GRACE_MARGIN = 5.0
PREFIX = "malaunch-simulate-"  # of the platform's temporary directory


def default_log_dir(value: Optional[str]) -> Path:
    """The simulation's log directory, absolute (node launchers run with their own cwd)."""
    return Path(value or "malaunch-logs").absolute()


def free_ports() -> Iterator[int]:
    """Distinct ports free on every local address (TF servers bind 0.0.0.0)."""
    seen: set[int] = set()
    while True:
        port = free_port("0.0.0.0")
        if port not in seen:
            seen.add(port)
            yield port


def launcher_command() -> List[str]:
    """The installed ``malaunch`` beside this interpreter, else on PATH, else ``-m malaunch``."""
    beside = Path(sys.executable).with_name("malaunch")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("malaunch")
    return [found] if found else [sys.executable, "-m", "malaunch"]


def base_environ(environ: Mapping[str, str]) -> Dict[str, str]:
    """This environment without platform variables: nodes get only the fabricated ones."""
    return without_platform_vars(environ, extra_names=LAUNCHER_SET)


def node_argv(
    node: SimNode, cluster: SimCluster, values: Mapping[str, Any], nested: bool
) -> List[str]:
    """The start command of one node: the user's launcher options plus the node's own.

    ``nested``: the node's log dir is ``node-<k>/`` inside the simulation's own run folder,
    which the node launcher writes into as it is (``--log-dir-is-run``). Printed for hand-started
    launchers (``--print-env``) it is not: each of those keeps run folders of its own there.
    """
    argv = [*launcher_command(), *values["launcher_tokens"], *node.launcher_args]
    if cluster.master_port is not None and values.get("master_port") is None:
        argv += ["--master-port", str(cluster.master_port)]  # no port variable on this platform
    if cluster.job_port is not None and values.get("job_port") is None:
        argv += ["--job-port", str(cluster.job_port)]
    argv += ["--log-dir", str(node.log_dir), *(["--log-dir-is-run"] if nested else [])]
    return [*argv, "--", *values["command"]]


def node_specs(
    cluster: SimCluster, values: Mapping[str, Any], log_dir: Path, nested: bool = True
) -> List[ProcessSpec]:
    cwd = str(Path.cwd())
    return [
        ProcessSpec(
            role="node",
            rank=node.index,
            argv=tuple(node_argv(node, cluster, values, nested)),
            env=dict(node.env),
            cwd=cwd,
            log_file=str(log_dir / f"node-{node.index}.log"),
        )
        for node in cluster.nodes
    ]


def writer_spec(
    cluster: SimCluster, values: Mapping[str, Any], staging: Path, log_dir: Path
) -> ProcessSpec:
    """The rank-table writer: the platform side of ModelArts, as a service process."""
    argv = [sys.executable, "-m", "malaunch.simulate.ranktable_writer", "--table", str(staging)]
    argv += ["--delay", str(values["ranktable_delay"])]
    if values["ranktable_never_ready"]:
        argv.append("--never")
    argv += [str(path) for path in cluster.rank_table_files]
    log_file = log_dir / "ranktable-writer.log"
    return ProcessSpec(
        role="ranktable", argv=tuple(argv), cwd=str(Path.cwd()), log_file=str(log_file),
        service=True,
    )  # fmt: skip


def simulation_topology(shape: JobShape, cluster: SimCluster) -> Topology:
    """The simulated cluster, for the plan's record (the summary and --debug output)."""
    nodes = tuple(
        Node(
            index=node.index,
            host=node.host,
            name=node.env.get("MA_CURRENT_INSTANCE_NAME"),
            role=node.label.split()[0],
        )
        for node in cluster.nodes
    )
    return Topology(
        source=f"simulate-{shape.platform}",
        nodes=nodes,
        node_rank=0,
        master_addr=nodes[0].host,
        master_port=cluster.master_port,
        job_id=f"ma-job-{shape.job_uuid}",
    )


def write_platform_files(cluster: SimCluster) -> None:
    """What the platform would have in place when the printed commands start: the nodes'
    directories and the rank table already completed (no writer runs beside them)."""
    for directory in cluster.directories:
        directory.mkdir(parents=True, exist_ok=True)
    if cluster.rank_table is not None:
        for path in cluster.rank_table_files:
            write_json(path, cluster.rank_table)


def prepare(shape: JobShape, cluster: SimCluster) -> Optional[Path]:
    """Create the nodes' directories and initial rank tables; the staging file of the table."""
    for directory in cluster.directories:
        directory.mkdir(parents=True, exist_ok=True)
    if cluster.rank_table is None:
        return None
    for path in cluster.rank_table_files:
        write_json(path, INITIALIZING)
    staging = shape.root / "jobstart_hccl.completed.json"
    staging.write_text(json.dumps(cluster.rank_table, indent=2) + "\n", encoding="utf-8")
    return staging


def run(values: Dict[str, Any], environ: Mapping[str, str]) -> int:
    """Fabricate the platform, then print it (``--print-env``) or run one launcher per node.

    A run writes into a run folder of its own in the log dir (:mod:`malaunch.supervisor.runs`),
    with the node launchers' ``node-<k>/`` inside it; ``--print-env`` creates nothing there
    and prints each node's log dir as ``<log dir>/node-<k>``.
    """
    signals = parse_signal_names(values["forward_signals"])  # a usage error before any work
    root = default_log_dir(values["log_dir"])
    if values["print_env"]:
        return print_env(values, environ, root)
    folder = RunFolder.create(root, f"--log-dir {root}", values["keep_runs"], time.time)
    try:
        given = values["platform_dir"]
        platform = Path(given).absolute() if given else Path(tempfile.mkdtemp(prefix=PREFIX))
        try:
            shape = job_shape(values, platform, folder.path)
            cluster = fabricate(shape, free_ports())
            specs = node_specs(cluster, values, shape.log_dir)
            return supervise_nodes(
                shape, cluster, specs, values, environ=environ, signals=signals, folder=folder
            )
        finally:
            if not given:
                shutil.rmtree(platform, ignore_errors=True)
    finally:
        folder.close()


def print_env(values: Dict[str, Any], environ: Mapping[str, str], log_dir: Path) -> int:
    """``--print-env``: each node's environment and command (with ``--platform-dir``, the
    platform's files written there)."""
    given = values["platform_dir"]
    root = Path(given or Path(tempfile.gettempdir()) / f"{PREFIX}XXXXXX").absolute()
    shape = job_shape(values, root, log_dir)
    cluster = fabricate(shape, free_ports())
    specs = node_specs(cluster, values, log_dir, nested=False)
    if given:
        write_platform_files(cluster)
    # The bytes the values came as (environment, arguments), whatever the locale encodes.
    click.echo(os.fsencode(render_env(shape, cluster, specs, environ, written=bool(given))))
    return 0


def job_shape(values: Mapping[str, Any], root: Path, log_dir: Path) -> JobShape:
    return JobShape(
        platform=values["platform"],
        nodes=values["nodes"],
        nproc_per_node=values["nproc_per_node"] or 1,
        root=root,
        log_dir=log_dir,
        num_ps=values["num_ps"],
        first_device_id=values["first_device_id"],
        chief=values["chief"],
    )


def supervise_nodes(
    shape: JobShape,
    cluster: SimCluster,
    specs: List[ProcessSpec],
    values: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    signals: Tuple[int, ...],
    folder: RunFolder,
) -> int:
    """Run the writer (modelarts) and the node launchers as one supervised plan."""
    staging = prepare(shape, cluster)
    processes = [writer_spec(cluster, values, staging, shape.log_dir)] if staging else []
    plan = LaunchPlan(
        framework=values["framework"],
        topology=simulation_topology(shape, cluster),
        processes=(*processes, *specs),
    )
    labels = ", ".join(f"node {n.index} = {n.label} at {n.host}" for n in cluster.nodes)
    logger.info(f"simulating {shape.platform}: {labels}; logs in {shape.log_dir}")
    # The nodes stop themselves through their job channel, exactly as on a cluster; the
    # parent only steps in (and calls it a failure) when one has not after the time its own
    # heartbeat timeout and grace period allow.
    grace = values["grace_period"] + NODE_GRACE_MARGIN
    options = SuperviseOptions(
        log_dir=str(shape.log_dir),
        grace_period=grace,
        forward_signals=signals,
        environ=base_environ(environ),
        fail_fast=False,
        straggler_timeout=values["heartbeat_timeout"] + grace,
        tail_lines=values["tail_lines"],
        tail_reader=node_failure_tail,
        say_start=False,
        replace_lost=values["replace_lost"],  # the platform's part: a kubelet's restart
        run_started=folder.started,
        console_raw=values["console_raw"],
    )
    return supervise(plan, options)


def node_failure_tail(spec: ProcessSpec, count: int) -> Tail:
    """A failed node's tail: its rank's last lines and exception from the node's summary
    (node-<k>/malaunch-summary.json), not the end of the node launcher's console, which
    holds that summary's table nested; the console's end when there is no summary."""
    path = Path(spec.log_file).with_suffix("") / "malaunch-summary.json"
    try:  # the launcher's bounded, never-blocking reader of its run files
        failure = load_json_object(path).get("first_failure")
    except (OSError, ValueError):
        failure = None
    if not isinstance(failure, dict) or not isinstance(failure.get("tail"), list):
        return own_log(spec, count)
    lines = [str(line)[:MAX_LINE] for line in failure["tail"]][-count:] if count > 0 else []
    exception = failure.get("exception") if isinstance(failure.get("exception"), str) else None
    return lines, exception, str(failure.get("tail_file") or failure.get("log_file") or path)
