"""The launch command: ``malaunch --framework NAME [OPTIONS] [--] COMMAND...``.

Its options are the core's plus those every installed framework plugin contributes; the
callback parses, calls the pipeline (:mod:`malaunch.pipeline`) and the supervisor, and returns
the exit code. The other commands live in :mod:`malaunch.cli.tools`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import click

from malaunch.cli.command import Command, about
from malaunch.cli.options import ENV_PREFIX, core_options, parse_env_pairs
from malaunch.cpus.bind import CpuBinder, CpuBindRequest
from malaunch.cpus.cpulist import parse_cpu_bind
from malaunch.errors import ExitCode, PluginError, UsageError
from malaunch.hang.watch import DEFAULT_STARTUP_TIMEOUT, HangSettings
from malaunch.job.restart import RestartPolicy, parse_backoff, parse_codes
from malaunch.job.settings import JobSettings, job_settings
from malaunch.job.success import success_policy
from malaunch.log import logger
from malaunch.models import LaunchPlan, PlanOptions, ResolveOptions, Topology
from malaunch.pipeline import AUTO, locate, plan_topology, warn_about_missing_data
from malaunch.plugins import PluginSet
from malaunch.python_command import forgotten_python
from malaunch.staging.models import StageMapping
from malaunch.staging.session import StagingStep, read_mappings
from malaunch.supervisor.runs import RunFolder, check_log_dir
from malaunch.supervisor.signals import parse_signal_names

EPILOG = """\b
Other commands:
  malaunch plugins [--json]            installed frameworks and topology sources
  malaunch topology [--json]           what the topology sources see here
  malaunch ranktable validate FILE     check an HCCL rank table
  malaunch ranktable convert IN OUT    template 2 -> template 1 (v1.0)
  malaunch ranktable generate OUT      this server's table from /etc/hccn.conf
  malaunch simulate --nodes N ...      run a multi-node job on this machine
  malaunch render TARGET --nodes N ... Kubernetes manifests that start malaunch
  malaunch logs [DIR]... [--follow]    rank logs merged in arrival order
  malaunch report [DIR] --html OUT     one HTML page: topology, timeline, failure
  malaunch --version

Every option can also be set as MALAUNCH_<OPTION> (e.g. MALAUNCH_FRAMEWORK=torch_ddp).
Exit codes: the first failing worker's code (128+N for signal N); 64 usage, 65 malformed
input, 66 missing file, 69 topology or peers not ready, 70 internal, 71 spawn failure,
74 staging I/O, 75 stopped because another node failed, 78 plugin error, 124 hang.
"""


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
    with about("--framework"):
        plugins.framework(framework)  # unknown name -> exit 78 before any topology work
    if params["topology"] != AUTO:
        with about("--topology"):
            plugins.source(params["topology"])
    if not command:
        msg = "no command given: malaunch --framework NAME [OPTIONS] -- COMMAND [ARG...]"
        raise UsageError(msg)
    # click has checked every value (malaunch.cli.options); these only convert them.
    extra_env = parse_env_pairs(params["env"])
    check_program(command, extra_env)
    forward_signals = parse_signal_names(params["forward_signals"])
    restart = restart_policy(params)
    hang = hang_settings(params)
    cpus = cpu_binder(ctx, params)
    # Read before the topology wait: a missing or malformed mapping file costs nothing.
    mappings = read_mappings(params["stage_in"], params["stage_out"], params["path_mapping"])
    if params["sync_interval"] and not any(m.direction == "out" for m in mappings):
        logger.warning("--sync-interval: there is no --stage-out to upload periodically")

    # Before the topology wait: an unusable log dir fails now, not after it as a spawn error.
    with run_folder(ctx, params) as run:
        log_dir = run.path
        resolve_options, plan_options = plan_inputs(params, log_dir, framework_values)

        def locate_here(
            master_port: Optional[int] = None, hosts: Optional[Mapping[int, str]] = None
        ) -> Topology:
            """This attempt's topology; a restart may bring node 0's fresh rendezvous port and
            the addresses replaced nodes came from."""
            master = (params["master_addr"], master_port or params["master_port"])
            where = params["topology"]
            return locate(plugins, os.environ, where, resolve_options, master, hosts=hosts)

        def plan_here(topology: Topology) -> LaunchPlan:
            # plan_options as set below, once the topology gave the job port
            return plan_topology(
                plugins,
                os.environ,
                topology,
                framework=framework,
                command=command,
                plan_options=plan_options,
                extra_env=extra_env,
                conda_env=params["conda_env"],
                cpus=cpus,
            )

        def make_plan(
            attempt: int = 0,
            master_port: Optional[int] = None,
            hosts: Optional[Mapping[int, str]] = None,
        ) -> LaunchPlan:
            """The plan of restart ``attempt``: the job channel (and its port) stays."""
            del attempt
            return plan_here(locate_here(master_port, hosts))

        topology = locate_here()
        # The channel's settings come from the topology the plan is made of, before the plan:
        # the plan sees the job port (PlanOptions.job_port), a dry run included.
        job = job_of(topology, params)
        plan_options = plan_options.model_copy(
            update={"job_port": job.port if job is not None else None}
        )
        if params["dry_run"]:
            return dry_run(plan_here(topology), params, mappings)
        # Start-up cost: the supervisor is imported only when launching, so --help and --dry-run
        # stay light.
        from malaunch.supervisor import preflight, prestart, supervise  # noqa: PLC0415 (start-up)

        preflight.check_job_port(topology, job.port if job is not None else None)
        # Node 0 listens on the job port from here: whatever fails before the start is told to
        # every node (malaunch.supervisor.prestart), which then stops at once, not at
        # --wait-timeout.
        with prestart.failures_told(prestart.EarlyChannel(job)) as channel:
            plan = plan_here(topology)
            success = success_policy(plan.topology, params["success_policy"])
            warn_about_missing_data(plan.topology)
            preflight.check_ports(plan)
            staged = staging_step(mappings, plan, params)
            options = supervise.SuperviseOptions(
                log_dir=str(log_dir),
                console_ranks=params["console_ranks"],
                grace_period=params["grace_period"],
                restart=restart,
                forward_signals=forward_signals,
                job=job,
                hang=hang,
                tail_lines=params["tail_lines"],
                console_prefix=params["console_prefix"],
                console_dedup=params["console_dedup"],
                console_raw=params["console_raw"],
                prepare=staged,
                finish=staged.finish if staged is not None else None,
                success_policy=success,
                run_started=run.started,
                channel=channel,
            )
            try:
                return supervise.supervise(plan, options, replan=make_plan)
            finally:
                if staged is not None:
                    staged.cancel()  # after an error: the periodic uploads stop with the launcher


def dry_run(plan: LaunchPlan, params: Dict[str, Any], mappings: Sequence[StageMapping]) -> int:
    """``--dry-run``: the plan as JSON, after the checks a launch makes of it."""
    success_policy(plan.topology, params["success_policy"])
    warn_about_missing_data(plan.topology)
    click.echo(plan_json(plan, mappings))
    return int(ExitCode.OK)


def staging_step(
    mappings: Sequence[StageMapping], plan: LaunchPlan, params: Dict[str, Any]
) -> Optional[StagingStep]:
    """Data staging for this launch, None without mappings. The stage-in runs inside
    supervise(), once this node has joined the job: its failure then stops every node, and a
    long one does not count against --wait-timeout."""
    if not mappings:
        return None
    return StagingStep(
        mappings,
        os.environ,
        plan.topology,
        launch_dir=os.getcwd(),
        sync_interval=params["sync_interval"],
    )


def check_program(command: Sequence[str], extra_env: Dict[str, str]) -> None:
    """A Python script given as the program (``train.py``, no ``python``) is a usage error
    now, not a spawn error of every rank after the topology wait."""
    path = extra_env.get("PATH", os.environ.get("PATH"))
    hint = forgotten_python(command, os.getcwd(), path)
    if hint is not None:
        raise UsageError(hint)


def plan_inputs(
    params: Dict[str, Any], log_dir: Path, framework_values: Dict[str, Any]
) -> Tuple[ResolveOptions, PlanOptions]:
    """What the topology source and the framework plugin are given; ``log_dir`` is the run
    folder, so that everything a plugin puts under its log dir lands in this run's."""
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
        max_restarts=params["max_restarts"],
    )
    return resolve_options, plan_options


def log_dir_origin(ctx: click.Context, value: Optional[str]) -> str:
    """How the log dir was given, for messages: ``--log-dir X``, ``MALAUNCH_LOG_DIR=X``,
    ``MA_LOG_DIR=X`` or the default."""
    if value:
        from_env = ctx.get_parameter_source("log_dir") == click.core.ParameterSource.ENVIRONMENT
        return f"{ENV_PREFIX}_LOG_DIR={_short(value)}" if from_env else f"--log-dir {_short(value)}"
    platform = os.environ.get("MA_LOG_DIR")
    return f"MA_LOG_DIR={_short(platform)}" if platform else "--log-dir malaunch-logs (the default)"


def _short(text: str) -> str:
    """A path for a message: a 5,000-character one must not make a 5,000-character line."""
    return text if len(text) <= 200 else f"{text[:100]}... ({len(text)} characters)"


@contextlib.contextmanager
def run_folder(ctx: click.Context, params: Dict[str, Any]) -> Iterator[RunFolder]:
    """This launch's run folder in the log dir (:mod:`malaunch.supervisor.runs`), checked and
    made before the topology wait; a launch that ends without starting a process removes it
    again, and earlier runs are never touched. A dry run makes nothing: its plan shows the
    log dir itself."""
    root = Path(params["log_dir"] or os.environ.get("MA_LOG_DIR") or "malaunch-logs").absolute()
    origin = log_dir_origin(ctx, params["log_dir"])
    if params["dry_run"]:
        check_log_dir(root, origin, create=False)
        run = RunFolder(root, root, 0, managed=False)
    elif params["log_dir_is_run"]:
        run = RunFolder.given(root, origin, create=True)
    else:
        run = RunFolder.create(root, origin, params["keep_runs"], time.time)
    try:
        yield run
    finally:
        run.close()


def plan_json(plan: LaunchPlan, mappings: Sequence[StageMapping] = ()) -> str:
    """The plan as JSON for ``--dry-run``.

    pydantic's own serialiser first: json.dumps(indent=...) falls back to pure Python, 1.5 s
    for a plan of 10,000 processes. But argv and the environment hold bytes, and bytes that
    are not UTF-8 reach Python as lone surrogates, which pydantic refuses to encode; json.dumps
    writes them as \\udcXX escapes (as ``topology --json`` does), and the plan is still printed.
    With data staging, the mappings are under ``"staging"``.
    """
    if not mappings:
        try:
            return plan.model_dump_json(indent=2)
        except ValueError:  # lone surrogates: json.dumps below writes them escaped
            pass
    document = plan.model_dump(mode="json")
    if mappings:
        document["staging"] = [mapping.model_dump(mode="json") for mapping in mappings]
    return json.dumps(document, indent=2)


def cpu_binder(ctx: click.Context, params: Dict[str, Any]) -> CpuBinder:
    """``--cpu-bind``, ``--npu-smi``, ``--sysfs-root``; messages name the option or its
    variable, whichever the value came from."""
    text = params["cpu_bind"]
    from_env = ctx.get_parameter_source("cpu_bind") == click.core.ParameterSource.ENVIRONMENT
    option = f"{ENV_PREFIX}_CPU_BIND" if from_env else "--cpu-bind"
    request = CpuBindRequest(
        mode=parse_cpu_bind(text, option),
        text=text,
        option=option,
        root=params["sysfs_root"],
        npu_smi=params["npu_smi"],
        environ=dict(os.environ),
    )
    binder = CpuBinder(request)
    binder.check()
    return binder


def restart_policy(params: Dict[str, Any]) -> RestartPolicy:
    """``--max-restarts``, ``--restart-backoff``, ``--min-uptime``, ``--restart-on``."""
    return RestartPolicy(
        max_restarts=params["max_restarts"],
        backoff=parse_backoff(params["restart_backoff"]),
        min_uptime=params["min_uptime"],
        restart_on=parse_codes(params["restart_on"]),
        rejoin_timeout=params["rejoin_timeout"],
    )


def hang_settings(params: Dict[str, Any]) -> Optional[HangSettings]:
    """``--hang-timeout`` and friends; None when hang detection is off."""
    timeout = params["hang_timeout"]
    if timeout is None:
        if params["hang_startup_timeout"] is not None:
            msg = "--hang-startup-timeout needs --hang-timeout"
            raise UsageError(msg)
        return None
    startup = params["hang_startup_timeout"] or max(timeout, DEFAULT_STARTUP_TIMEOUT)
    return HangSettings(timeout=timeout, startup_timeout=startup, stacks=params["hang_stacks"])


def job_of(topology: Topology, params: Dict[str, Any]) -> Optional[JobSettings]:
    """The job channel's settings for this node, or None for a one-node job."""
    return job_settings(
        topology,
        requested_port=params["job_port"],
        secret=params["job_secret"],
        heartbeat_timeout=params["heartbeat_timeout"],
        wait_timeout=params["wait_timeout"],
        enabled=params["job_channel"],
    )


def _spellings(param: click.Parameter) -> List[str]:
    return [param.name or "", *param.opts, *param.secondary_opts]


def build_launch_command(plugins: PluginSet) -> click.Command:
    """The launch command, with the options every installed framework contributes."""
    params = core_options()
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

    return Command(
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
