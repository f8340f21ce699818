"""The ``malaunch`` command: parse, call the core, render, exit.

This is the only module that reads ``os.environ``/``sys.argv``, configures loguru sinks or
exits. ``malaunch --framework NAME [OPTIONS] [--] COMMAND...`` launches; the other commands
(``plugins``, ``topology``, ``ranktable``, ``simulate``) live in :mod:`malaunch.commands`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import click

from malaunch import __version__, log
from malaunch.errors import ExitCode, MalaunchError, PluginError, UsageError
from malaunch.launch import AUTO, build_plan, parse_env_pairs, warn_about_missing_data
from malaunch.models import LaunchPlan, PlanOptions, ResolveOptions
from malaunch.plugins import PluginSet, load_plugins
from malaunch.supervise_signals import parse_signal_names

ENV_PREFIX = "MALAUNCH"
TOOL_COMMANDS = ("plugins", "topology", "ranktable", "simulate")
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


def setup_logging(debug: bool) -> None:
    """The launcher's own messages: one stderr sink, prefixed so they stand out from workers.

    The sink is installed when the first message is printed (see malaunch.log)."""
    level = "DEBUG" if debug else "INFO"

    def configure(real_logger: Any) -> None:
        real_logger.remove()
        # A format *string* cannot call .lower(); loguru accepts a function returning one.
        real_logger.add(sys.stderr, level=level, format=_log_format)

    log.set_up(level, configure)


def _log_format(record: Any) -> str:
    return f"malaunch: {record['level'].name.lower()}: {{message}}\n{{exception}}"


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
        log_dir=str(log_dir), environ=dict(os.environ), framework_options=framework_values
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
    # The supervisor is imported only when launching: --help and --dry-run stay light.
    from malaunch.preflight import check_master_port  # noqa: PLC0415
    from malaunch.supervisor import SuperviseOptions, supervise  # noqa: PLC0415

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
            if opt.help is not None and not opt.help.startswith("["):
                opt.help = f"[{name}] {opt.help}"
            params.insert(len(params) - 1, opt)

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


def _wants_debug(args: Sequence[str]) -> bool:
    head = args[: args.index("--")] if "--" in args else args
    return "--debug" in head or os.environ.get("MALAUNCH_DEBUG", "") not in ("", "0", "false")


def _run(args: List[str]) -> int:
    if args and args[0] == "--version":
        click.echo(f"malaunch {__version__}")
        return ExitCode.OK
    if args and args[0] in TOOL_COMMANDS:
        from malaunch.commands import tools  # noqa: PLC0415 (keep the launch path light)

        result = tools.main(args, prog_name="malaunch", standalone_mode=False)
    else:
        plugins = load_plugins(os.environ)
        command = build_launch_command(plugins)
        result = command.main(args, prog_name="malaunch", standalone_mode=False)
    return int(result) if isinstance(result, int) else ExitCode.OK


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line and return the exit code (SPEC §3)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = _wants_debug(args)
    setup_logging(debug)
    try:
        return _run(args)
    except MalaunchError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"malaunch: error: {exc}", err=True)
        return int(exc.exit_code)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        return ExitCode.for_signal(2)
    except click.ClickException as exc:
        exc.show()
        return int(ExitCode.USAGE)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Run the command line and exit with its code (``python -m malaunch``)."""
    sys.exit(run(argv))


def console_main() -> None:
    """The ``malaunch`` console script: like :func:`main`, minus the interpreter's teardown.

    Tearing down pydantic's, click's and the plugins' modules costs 40-70 ms of CPU on every
    run, and a platform waits for it after the last worker has already exited. By now every
    log, summary and rank table is written and closed, so only the standard streams need a
    flush.
    """
    code = run()
    for stream in (sys.stdout, sys.stderr):
        # A reader that went away, or a closed stream, must not turn the code into a crash.
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code)
