"""``malaunch simulate``: a multi-node job on this machine, each node started as its platform would.

For each simulated node the platform's environment is fabricated
(:mod:`malaunch.simulate.platforms`) and one real ``malaunch`` launcher is run with it
(:mod:`malaunch.simulate.run`). The command takes every option of the launch command (core and
framework options) and passes the ones given on the command line on to the node launchers, so
``malaunch simulate --nodes 2 --platform octopus --framework torch_ddp -- python train.py``
reads like the platform's own start command.
"""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import Any, Dict, List, Mapping, Sequence

import click

from malaunch.cli.command import Command, envvar_name
from malaunch.cli.launch import build_launch_command, check_program
from malaunch.cli.options import keep_runs_option, parse_env_pairs
from malaunch.errors import UsageError
from malaunch.files import check_directory
from malaunch.log import logger
from malaunch.numbers import MAX_LOCAL_PROCESSES, MAX_WORLD_SIZE
from malaunch.params import Choice, Integer, Path, Seconds
from malaunch.plugins import load_plugins
from malaunch.simulate.platforms import PLATFORMS, PS_PLATFORM, default_platform
from malaunch.simulate.run import run

HELP = """Run COMMAND as a multi-node job on this machine, one malaunch per simulated node.

Each node gets the environment its platform would inject (loopback addresses 127.0.0.<k+1>,
free ports, per-node directories; a ModelArts rank table that completes after
--ranktable-delay), and its own launcher. Launcher options (--framework, --console-ranks,
--grace-period, --wait-timeout, --env, framework options, ...) are passed to every node.
Logs: each simulation writes a run folder of its own in the log dir, <log dir>/run-<UTC
time>-<id>/ (`latest` names the newest), holding node-<k>.log (all a node printed), node-<k>/
(its launcher's logs and summary) and malaunch-summary.json (one row per node). Exit code:
the first failing node's, as on a real cluster.
"""


def simulate_options() -> List[click.Parameter]:
    """The options of ``simulate`` itself (the launch command's options come on top)."""
    return [
        click.Option(
            ["--nodes"], type=Integer(1, 1024), required=True,
            help="Simulated nodes (with --platform tf-ps: worker tasks).",
        ),
        click.Option(
            ["--platform"], type=Choice(PLATFORMS),
            help="Whose environment to fabricate: modelarts (Ascend rank table), octopus, "
            "volcano, tf-ps (one node per chief/ps/worker task); from `malaunch render`'s "
            "manifest: pytorchjob (Kubeflow), volcano-pytorch (master + worker tasks, pytorch "
            "plugin), ascendjob (MindX, PyTorch).  [default: volcano, the plainest (a host "
            "list, a node index, --nproc-per-node); tf-ps for tensorflow_ps]",
        ),
        click.Option(
            ["--nproc-per-node"], type=Integer(1, MAX_LOCAL_PROCESSES), default=1,
            show_default=True,
            help="Processes (devices) per node: MA_NUM_GPUS, rank-table devices, or "
            "--nproc-per-node of each node launcher (volcano).",
        ),
        click.Option(
            ["--log-dir"], type=Path(file_okay=False), default="malaunch-logs",
            show_default=True,
            help="Each simulation's run folder goes there, run-<UTC time>-<id>/: node-<k>.log, "
            "node-<k>/ (each node launcher's --log-dir) and the summary.",
        ),
        keep_runs_option(),
        click.Option(
            ["--num-ps"], type=Integer(1, 1024), default=1, show_default=True,
            help="[tf-ps] parameter-server tasks (each its own node, before the workers).",
        ),
        click.Option(
            ["--chief"], is_flag=True,
            help="[tf-ps] a chief task too (its own node, node 0: TF_CHIEF_HOSTS); the job "
            "then succeeds when the chief does (--success-policy).",
        ),
        click.Option(
            ["--print-env"], is_flag=True,
            help="Print each node's platform environment and launcher command, every value "
            "quoted for a shell (`set -a; . FILE` exports them, running nothing in them); start "
            "nothing (with --platform-dir, also write the platform's files there, rank table "
            "completed).",
        ),
        click.Option(
            ["--ranktable-delay"], type=Seconds(), default=2.0, show_default=True,
            help="[modelarts] seconds until the rank table turns completed.",
        ),
        click.Option(
            ["--ranktable-never-ready"], is_flag=True,
            help="[modelarts] the rank table never completes (tests --wait-timeout).",
        ),
        click.Option(
            ["--first-device-id"], type=Integer(0, 15), default=0, show_default=True,
            help="[modelarts] physical id of each node's first NPU in the rank table.",
        ),
        click.Option(
            ["--replace-lost"], type=Seconds(), metavar="DELAY",
            help="Start a node launcher killed by a signal again after DELAY seconds, as a "
            "kubelet restarts a container; it rejoins the job (with --max-restarts > 0). "
            "With --print-env, rerun the lost node's printed command instead.",
        ),
        click.Option(
            ["--platform-dir"], type=Path(file_okay=False),
            help="Keep the nodes' platform files (mounts, rank tables, data dirs) here "
            "[default: a temporary directory, removed at the end].",
        ),
    ]  # fmt: skip


def option_tokens(option: click.Option, value: Any) -> List[str]:
    """The command-line tokens that give ``option`` the parsed ``value`` again."""
    name = next((opt for opt in option.opts if opt.startswith("--")), option.opts[0])
    if option.is_flag and option.is_bool_flag:
        if value:
            return [name]
        return [option.secondary_opts[0]] if option.secondary_opts else []
    if option.count:
        return [name] * int(value)
    values = value if option.multiple else (value,)
    tokens: List[str] = []
    for item in values:
        items = item if option.nargs > 1 else (item,)
        tokens += [name, *(str(part) for part in items)]
    return tokens


def launcher_tokens(
    ctx: click.Context, forwarded: Sequence[click.Option], values: Mapping[str, Any]
) -> List[str]:
    """Launcher options the user gave on the command line, in a form the launcher parses.

    Options from ``MALAUNCH_*`` variables are not repeated: the node launchers inherit them.
    """
    tokens: List[str] = []
    for option in forwarded:
        name = option.name
        if name is None:
            continue
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            tokens += option_tokens(option, values[name])
    return tokens


def build_command(environ: Mapping[str, str]) -> click.Command:
    """``simulate`` with its own options plus every option of the launch command."""
    launch = build_launch_command(load_plugins(environ))
    own = simulate_options()
    taken = {opt for param in own for opt in param.opts}
    # tensorflow_ps's --num-ps plans a one-machine cluster; here --num-ps shapes the platform.
    taken.add("--log-dir-is-run")  # simulate sets it on its node launchers itself
    forwarded = [
        p for p in launch.params if isinstance(p, click.Option) and not taken.intersection(p.opts)
    ]
    arguments = [p for p in launch.params if isinstance(p, click.Argument)]

    def callback(**values: Any) -> int:
        ctx = click.get_current_context()
        return run(request(values, launcher_tokens(ctx, forwarded, values)), environ)

    return Command(
        "simulate",
        params=[*own, *forwarded, *arguments],
        callback=callback,
        help=HELP,
        context_settings={
            "allow_interspersed_args": False,
            "help_option_names": ["-h", "--help"],
            "auto_envvar_prefix": "MALAUNCH",
            "show_default": True,
        },
    )


def request(values: Dict[str, Any], tokens: List[str]) -> Dict[str, Any]:
    """Check what every platform needs and keep what :func:`run` uses."""
    if not values.get("framework"):
        msg = "simulate: missing --framework (or MALAUNCH_FRAMEWORK); see `malaunch plugins`"
        raise UsageError(msg)
    command = list(values["command"])
    if not command and not values["dry_run"]:
        msg = "simulate: no command given: malaunch simulate ... --framework NAME -- COMMAND"
        raise UsageError(msg)
    check_program(command, parse_env_pairs(values["env"]))  # once here, not once per node
    # Once here, naming the options: each node launcher would refuse the job on its own.
    nodes, per_node = values["nodes"], values["nproc_per_node"]
    if nodes * per_node > MAX_WORLD_SIZE:
        msg = (
            f"{_named('nodes')} {nodes} x {_named('nproc_per_node')} {per_node} gives "
            f"{nodes * per_node} ranks; at most {MAX_WORLD_SIZE} in one job"
        )
        raise UsageError(msg)
    platform = values["platform"]
    if platform is None:
        platform, why = default_platform(values["framework"])
        logger.info(f"no --platform given: simulating {platform} ({why}; --platform chooses)")
    if values["chief"] and platform != PS_PLATFORM:
        msg = f"--chief: only --platform {PS_PLATFORM} has a chief task (not {platform})"
        raise UsageError(msg)
    if values.get("platform_dir"):
        check_platform_dir(values["platform_dir"])
    return {**values, "platform": platform, "command": command, "launcher_tokens": tokens}


def _named(name: str) -> str:
    """The option ``name`` as the user gave it: its flag, or its ``MALAUNCH_`` variable."""
    ctx = click.get_current_context()
    param = next(p for p in ctx.command.params if p.name == name)
    if ctx.get_parameter_source(name) is click.core.ParameterSource.ENVIRONMENT:
        return envvar_name(param, ctx)
    return param.opts[0]


def check_platform_dir(given: str) -> None:
    """UsageError (64) naming ``--platform-dir`` when its folder cannot be made or written:
    the nodes' files are written there before anything starts (print-only runs too)."""
    try:
        check_directory(FsPath(given).absolute(), create=True)
    except OSError as exc:
        msg = f"--platform-dir {given}: cannot create the directory: {exc.strerror or exc}"
        raise UsageError(msg) from exc


def main(args: Sequence[str], environ: Mapping[str, str]) -> int:
    """Parse ``malaunch simulate ARGS`` and run the simulation; returns the exit code."""
    command = build_command(environ)
    result = command.main(list(args), prog_name="malaunch simulate", standalone_mode=False)
    return int(result) if isinstance(result, int) else 0
