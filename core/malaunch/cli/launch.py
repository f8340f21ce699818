"""The launch command: ``malaunch --framework NAME [OPTIONS] [--] COMMAND...``.

Its options are the core's plus those every installed framework plugin contributes; the
callback parses, calls the pipeline (:mod:`malaunch.pipeline`) and the supervisor, and returns
the exit code. The other commands live in :mod:`malaunch.cli.tools`.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import click

from malaunch.errors import ExitCode, PluginError, UsageError
from malaunch.models import LaunchPlan, PlanOptions, ResolveOptions
from malaunch.pipeline import AUTO, build_plan, warn_about_missing_data
from malaunch.plugins import PluginSet
from malaunch.supervisor.signals import parse_signal_names

ENV_PREFIX = "MALAUNCH"
DEFAULT_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")

EPILOG = """\b
Other commands:
  malaunch plugins [--json]            installed frameworks and topology sources
  malaunch topology [--json]           what the topology sources see here
  malaunch ranktable validate FILE     check an HCCL rank table
  malaunch ranktable convert IN OUT    template 2 -> template 1 (v1.0)
  malaunch simulate --nodes N ...      run a multi-node job on this machine
  malaunch --version

Every option can also be set as MALAUNCH_<OPTION> (e.g. MALAUNCH_FRAMEWORK=torch_ddp).
Exit codes: the first failing worker's code (128+N for signal N); 64 usage, 65 malformed
input, 66 missing file, 69 topology not ready, 70 internal, 71 spawn failure, 78 plugin error.
"""


def parse_env_pairs(pairs: Sequence[str]) -> Dict[str, str]:
    """``--env KEY=VALUE`` items; the value may itself contain ``=``."""
    result: Dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not key.replace("_", "a").isalnum() or key[0].isdigit():
            msg = f"--env {pair!r}: expected KEY=VALUE with KEY a variable name"
            raise UsageError(msg)
        result[key] = value
    return result


def _split_framework_values(
    plugins: PluginSet, chosen: str, values: Dict[str, Any], ctx: click.Context
) -> Dict[str, Any]:
    """Keep the chosen framework's option values; refuse options of another framework."""
    mine: Dict[str, Any] = {}
    for name, registered in plugins.frameworks.items():
        for opt in registered.item.options:
            if opt.name is None or opt.name not in values:
                continue
            value = values.pop(opt.name)
            if name == chosen:
                mine[opt.name] = value
                continue
            source = ctx.get_parameter_source(opt.name)
            if source not in (None, click.core.ParameterSource.DEFAULT):
                msg = f"{opt.opts[0]} is an option of framework {name!r}, not of {chosen!r}"
                raise UsageError(msg)
    return mine


def _launch(plugins: PluginSet, ctx: click.Context, params: Dict[str, Any]) -> int:
    command: Tuple[str, ...] = params.pop("command")
    framework: str = params.pop("framework")
    framework_values = _split_framework_values(plugins, framework, params, ctx)
    plugins.framework(framework)  # unknown name -> exit 78 before any topology work
    if not command:
        msg = "no command given: malaunch --framework NAME [OPTIONS] -- COMMAND [ARG...]"
        raise UsageError(msg)
    log_dir = Path(params["log_dir"] or os.environ.get("MA_LOG_DIR") or "malaunch-logs")
    log_dir = log_dir.absolute()
    resolve_options = ResolveOptions(
        nproc_per_node=params["nproc_per_node"],
        wait_timeout=params["wait_timeout"],
        log_dir=str(log_dir),
    )
    plan_options = PlanOptions(
        log_dir=str(log_dir),
        cwd=os.getcwd(),
        environ=dict(os.environ),
        framework_options=framework_values,
    )
    extra_env = parse_env_pairs(params["env"])
    # Checked before the topology wait, so a typo does not cost --wait-timeout.
    forward_signals = parse_signal_names(params["forward_signals"])

    def make_plan(_attempt: int = 0) -> LaunchPlan:
        return build_plan(
            plugins,
            os.environ,
            framework=framework,
            source=params["topology"],
            command=command,
            resolve_options=resolve_options,
            plan_options=plan_options,
            master=(params["master_addr"], params["master_port"]),
            extra_env=extra_env,
            conda_env=params["conda_env"],
        )

    plan = make_plan()
    warn_about_missing_data(plan.topology)
    if params["dry_run"]:
        click.echo(json.dumps(plan.to_json_dict(), indent=2))
        return int(ExitCode.OK)
    # Start-up cost: the supervisor is imported only when launching, so --help and --dry-run
    # stay light.
    from malaunch.supervisor.preflight import check_master_port  # noqa: PLC0415 (start-up)
    from malaunch.supervisor.supervise import SuperviseOptions, supervise  # noqa: PLC0415 (start-up)

    check_master_port(plan)
    options = SuperviseOptions(
        log_dir=str(log_dir),
        console_ranks=params["console_ranks"],
        grace_period=params["grace_period"],
        max_restarts=params["max_restarts"],
        forward_signals=forward_signals,
    )
    return supervise(plan, options, replan=make_plan)


def _core_options() -> List[click.Parameter]:
    return [
        click.Option(["--framework"], metavar="NAME", help="Framework plugin to launch with."),
        click.Option(
            ["--topology"],
            default=AUTO,
            show_default=True,
            metavar="SOURCE",
            help="Topology source: auto, or a name from `malaunch plugins` (ranktable, tf-ps, "
            "tf-config, mindx, volcano, slurm, local, ...).",
        ),
        click.Option(
            ["--nproc-per-node"],
            type=click.IntRange(min=1),
            help="Local processes where the source lists no devices.",
        ),
        click.Option(["--master-addr"], help="Override the resolved rendezvous address."),
        click.Option(
            ["--master-port"],
            type=click.IntRange(1, 65535),
            help="Override the resolved rendezvous port.",
        ),
        click.Option(
            ["--log-dir"],
            type=click.Path(file_okay=False),
            help="Per-rank logs and malaunch-summary.json "
            "[default: $MA_LOG_DIR or ./malaunch-logs]",
        ),
        click.Option(
            ["--console-ranks"],
            default="all",
            show_default=True,
            metavar="SPEC",
            help="Ranks echoed to the console with a prefix: all, none, or e.g. 0,3-5.",
        ),
        click.Option(
            ["--grace-period"],
            type=click.FloatRange(min=0),
            default=5.0,
            show_default=True,
            help="Seconds between SIGTERM and SIGKILL at teardown.",
        ),
        click.Option(
            ["--max-restarts"],
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="Restart the local group this many times after a failure.",
        ),
        click.Option(
            ["--wait-timeout"],
            type=click.FloatRange(min=0),
            default=600.0,
            show_default=True,
            help="Seconds to wait for a rank table or peers to become ready.",
        ),
        click.Option(
            ["--conda-env"], metavar="NAME|PATH", help="Run `python` from this conda env."
        ),
        click.Option(
            ["--env"],
            multiple=True,
            metavar="KEY=VALUE",
            help="Extra environment for every process (repeatable).",
        ),
        click.Option(
            ["--forward-signals"],
            default=",".join(DEFAULT_SIGNALS),
            show_default=True,
            metavar="LIST",
            help="Signals forwarded to every process group (e.g. add SIGUSR1).",
        ),
        click.Option(["--dry-run"], is_flag=True, help="Print the plan as JSON; start nothing."),
        click.Option(["--debug"], is_flag=True, help="Show tracebacks and debug messages."),
        click.Argument(["command"], nargs=-1, type=click.UNPROCESSED),
    ]


def _spellings(param: click.Parameter) -> List[str]:
    return [param.name or "", *param.opts, *param.secondary_opts]


def build_launch_command(plugins: PluginSet) -> click.Command:
    """The launch command, with the options every installed framework contributes."""
    params = _core_options()
    # Flags (``--no-x`` too) and parameter names a framework's option must not take over.
    taken = {"-h", "--help", *(s for p in params for s in _spellings(p))}
    for name, registered in sorted(plugins.frameworks.items()):
        for opt in registered.item.options:
            clash = taken.intersection(_spellings(opt))
            if clash:
                msg = (
                    f"framework {name!r} ({registered.origin.describe()}) adds option "
                    f"{sorted(clash)[0]}, which already exists"
                )
                raise PluginError(msg)
            taken.update(_spellings(opt))
            # A copy: the plugin's own option object stays as the plugin made it.
            shown = copy.copy(opt)
            if shown.help is not None:
                shown.help = f"[{name}] {shown.help}"
            params.insert(len(params) - 1, shown)

    def callback(**values: Any) -> int:
        ctx = click.get_current_context()
        if not values.get("framework"):
            msg = "missing --framework (or MALAUNCH_FRAMEWORK); see `malaunch plugins`"
            raise UsageError(msg)
        return _launch(plugins, ctx, values)

    return click.Command(
        "malaunch",
        params=params,
        callback=callback,
        epilog=EPILOG,
        help="Launch COMMAND as the processes of a distributed training job.",
        context_settings={
            "allow_interspersed_args": False,
            "help_option_names": ["-h", "--help"],
            "auto_envvar_prefix": ENV_PREFIX,
            "show_default": True,
        },
    )
