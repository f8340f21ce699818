"""The launch command's own options (frameworks add theirs in :mod:`malaunch.cli.launch`).

Every option has an environment twin ``MALAUNCH_<OPTION>`` (click's ``auto_envvar_prefix``).
Every value is checked while click parses, before any topology work: a typo costs neither
``--wait-timeout`` nor a dry run that prints a plan the launch would then refuse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

import click

from malaunch.cpus.cpulist import parse_cpu_bind
from malaunch.errors import UsageError
from malaunch.hang.watch import STACK_METHODS
from malaunch.job.restart import (
    DEFAULT_BACKOFF,
    DEFAULT_REJOIN_TIMEOUT,
    parse_backoff,
    parse_codes,
)
from malaunch.job.settings import DEFAULT_HEARTBEAT_TIMEOUT
from malaunch.job.success import POLICIES as SUCCESS_POLICIES
from malaunch.numbers import MAX_LOCAL_PROCESSES
from malaunch.params import EMPTY, Choice, Host, Integer, Path, Seconds, Text, port
from malaunch.pipeline import AUTO
from malaunch.rankspec import parse_rank_spec
from malaunch.staging.parse import parse_pairs
from malaunch.supervisor.output import check_prefix_template
from malaunch.supervisor.runs import DEFAULT_KEEP_RUNS
from malaunch.supervisor.signals import parse_signal_names

if TYPE_CHECKING:  # click 8.1 (Python 3.9) has no generic ParamType
    StrType = click.ParamType[str]
else:
    StrType = click.ParamType

ENV_PREFIX = "MALAUNCH"
DEFAULT_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")


def parse_env_pairs(pairs: Sequence[str]) -> Dict[str, str]:
    """``--env KEY=VALUE`` items; the value may itself contain ``=``."""
    result: Dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        # ASCII only: str.isalnum() also takes letters and digits of every other script.
        name = key.replace("_", "a")
        if not (sep and name.isascii() and name.isalnum() and not key[0].isdigit()):
            msg = f"--env {pair!r}: expected KEY=VALUE with KEY a variable name"
            raise UsageError(msg)
        result[key] = value
    return result


class Checked(StrType):
    """A text option checked by one of the launcher's own parsers while click parses.

    The value stays text (``simulate`` passes it on to its node launchers as typed); the
    parser's UsageError, which starts with the option, becomes click's BadParameter, which the
    error boundary prints naming the option or the ``MALAUNCH_`` variable the value came from.
    """

    def __init__(
        self, name: str, check: Callable[[str], object], empty_means: Optional[str] = None
    ) -> None:
        self.name = name
        self.check = check
        self.empty_means = empty_means

    def convert(
        self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]
    ) -> str:
        text = str(value)
        if text == "" and self.empty_means is None:
            self.fail(EMPTY, param, ctx)
        try:
            self.check(text)
        except UsageError as exc:
            self.fail(str(exc), param, ctx)
        return text


def core_options() -> List[click.Parameter]:
    """The launch command's own options, fresh objects each call; the command argument last."""
    return [
        click.Option(
            ["--framework"], type=Text(), metavar="NAME", help="Framework plugin to launch with."
        ),
        click.Option(
            ["--topology"],
            type=Text(),
            default=AUTO,
            show_default=True,
            metavar="SOURCE",
            help="Topology source: auto, or a name from `malaunch plugins` (ranktable, tf-ps, "
            "tf-config, kubeflow, mindx, mindx-pytorch, mindx-tensorflow, volcano-tasks, volcano, "
            "slurm, local, ...).",
        ),
        click.Option(
            ["--nproc-per-node"],
            type=Integer(1, MAX_LOCAL_PROCESSES),
            help="Local processes where the source lists no devices.",
        ),
        click.Option(
            ["--master-addr"], type=Host(), help="Override the resolved rendezvous address."
        ),
        click.Option(
            ["--master-port"],
            type=port(),
            help="Override the resolved rendezvous port.",
        ),
        *run_folder_options(),
        click.Option(
            ["--console-ranks"],
            type=Checked("spec", lambda text: parse_rank_spec(text, "--console-ranks")),
            default="all",
            show_default=True,
            metavar="SPEC",
            help="Ranks echoed to the console with a prefix: all, none, or e.g. 0,3-5.",
        ),
        click.Option(
            ["--grace-period"],
            type=Seconds(),
            default=5.0,
            show_default=True,
            help="Seconds between SIGTERM and SIGKILL at teardown.",
        ),
        click.Option(
            ["--wait-timeout"],
            type=Seconds(),
            default=600.0,
            show_default=True,
            help="Seconds to wait for a rank table or peers to become ready.",
        ),
        click.Option(
            ["--conda-env"],
            type=Path(),  # a name or a directory; either must be one the system takes
            metavar="NAME|PATH",
            help="Run `python` from this conda env.",
        ),
        click.Option(
            ["--env"],
            type=Checked("pair", lambda text: parse_env_pairs([text])),
            multiple=True,
            metavar="KEY=VALUE",
            help="Extra environment for every process (repeatable).",
        ),
        click.Option(
            ["--forward-signals"],
            type=Checked("list", parse_signal_names),
            default=",".join(DEFAULT_SIGNALS),
            show_default=True,
            metavar="LIST",
            help="Signals forwarded to every process group (e.g. add SIGUSR1).",
        ),
        click.Option(
            ["--console-prefix"],
            type=Checked("template", check_prefix_template, empty_means="no prefix"),
            metavar="TEMPLATE",
            help="Console prefix from {node}, {host}, {rank}, {local_rank}, {role} (text; "
            "a width such as {rank:>3} at most 64), e.g. '[{host} {rank}] ' "
            "[default: [rank N] ]",
        ),
        click.Option(
            ["--console-dedup"],
            is_flag=True,
            help="Print identical lines of many ranks once, as [ranks 0-7] (logs keep all); "
            "with --console-prefix, its template with the fields that differ between those "
            "ranks as spans (0-7) or *.",
        ),
        click.Option(
            ["--console-raw"],
            is_flag=True,
            help="Pass the ranks' terminal controls to the console as they are. By default "
            "(on a terminal, a pipe or a file) any control but colour (SGR), tab and newline "
            "shows as text like \\x1b (titles, clipboard writes, cursor moves, C1), and a "
            "carriage return repeats the line's prefix. Log files always keep the bytes.",
        ),
        click.Option(
            ["--tail-lines"],
            type=Integer(0, 10_000),
            default=20,
            show_default=True,
            help="Last lines of the failed rank's log shown in the summary (0: none).",
        ),
        *job_options(),
        *staging_options(),
        *cpu_options(),
        click.Option(["--dry-run"], is_flag=True, help="Print the plan as JSON; start nothing."),
        click.Option(["--debug"], is_flag=True, help="Show tracebacks and debug messages."),
        click.Argument(["command"], nargs=-1, type=click.UNPROCESSED),
    ]


def keep_runs_option() -> click.Option:
    """``--keep-runs``, shared with ``simulate``."""
    return click.Option(
        ["--keep-runs"],
        type=Integer(0, 1_000_000),
        default=DEFAULT_KEEP_RUNS,
        show_default=True,
        help="Runs kept in the log dir, this one included: once this run has started, the "
        "oldest beyond it are removed, each said on the console (0: keep all).",
    )


def run_folder_options() -> List[click.Parameter]:
    """Where a run's files go (SPEC §12): each launch in a run folder of its own."""
    return [
        click.Option(
            ["--log-dir"],
            type=Path(file_okay=False),
            help="Each launch writes its per-rank logs and summary to a folder of its own "
            "there, run-<UTC time>-<id>/; `latest` names the newest "
            "[default: $MA_LOG_DIR or ./malaunch-logs]",
        ),
        keep_runs_option(),
        # simulate's node launchers: their --log-dir is node-<k>/ inside simulate's own run.
        click.Option(
            ["--log-dir-is-run"],
            is_flag=True,
            hidden=True,
            allow_from_autoenv=False,
            help="Write into --log-dir as it is: no run folder, no latest, no pruning.",
        ),
    ]


def job_options() -> List[click.Parameter]:
    """The job across nodes: channel, restarts, hangs (SPEC §9)."""
    return [
        click.Option(
            ["--max-restarts"],
            type=Integer(0, 1000),
            default=0,
            show_default=True,
            help="Restart the whole job (every node together) this many times after a failure.",
        ),
        click.Option(
            ["--restart-backoff"],
            type=Checked("seconds", parse_backoff),
            default=DEFAULT_BACKOFF,
            show_default=True,
            metavar="BASE[:MAX]",
            help="Seconds before restart n: min(MAX, BASE*2^(n-1)), half of it random.",
        ),
        click.Option(
            ["--min-uptime"],
            type=Seconds(),
            default=0.0,
            show_default=True,
            help="A failure sooner than this after the start is a start-up crash: no restart.",
        ),
        click.Option(
            ["--restart-on"],
            type=Checked("codes", parse_codes),
            default="any",
            show_default=True,
            metavar="CODES",
            help="Exit codes worth a restart: any, or e.g. 1,70-79,SIGKILL.",
        ),
        click.Option(
            ["--rejoin-timeout"],
            type=Seconds(),
            default=DEFAULT_REJOIN_TIMEOUT,
            show_default=True,
            help="How long the other nodes wait for a lost node's replacement (a pod "
            "rescheduled, its image pulled) while restarts remain; 0: never.",
        ),
        click.Option(
            ["--job-port"],
            type=port(),
            help="Port of the job channel node 0's launcher serves "
            "[default: master port + 1, else one hashed from the job]",
        ),
        click.Option(
            ["--job-secret"],
            type=Text(empty_means="no secret"),
            default="",
            metavar="TEXT",
            help="Mixed into the job channel's token (set the same on every node).",
        ),
        click.Option(
            ["--job-channel/--no-job-channel"],
            default=True,
            show_default=True,
            help="Tie the node launchers of a multi-node job together (stop, finish, restart).",
        ),
        click.Option(
            ["--success-policy"],
            type=Choice(SUCCESS_POLICIES),
            help="When the job has succeeded: chief (once the chief has; workers and ps are "
            "stopped, TFJob's default) or all-workers (every worker has) [default: chief "
            "when the cluster has a chief, else all-workers]",
        ),
        click.Option(
            ["--heartbeat-timeout"],
            type=Seconds(0.1),
            default=DEFAULT_HEARTBEAT_TIMEOUT,
            show_default=True,
            help="Seconds of silence after which a node launcher counts as lost (past "
            "5,000 nodes, three heartbeat intervals if longer: docs/job.md).",
        ),
        click.Option(
            ["--hang-timeout"],
            type=Seconds(0.1),
            help="A rank with no output and no heartbeat for this long is hung: capture "
            "every rank's stack, stop the job, exit 124 [default: off]",
        ),
        click.Option(
            ["--hang-startup-timeout"],
            type=Seconds(0.1),
            help="The same before a rank's first output or heartbeat "
            "[default: the larger of --hang-timeout and 300]",
        ),
        click.Option(
            ["--hang-stacks"],
            type=Choice(STACK_METHODS),
            default="auto",
            show_default=True,
            help="How stacks are captured: py-spy where it works, else faulthandler "
            "(which ends the rank).",
        ),
    ]


def staging_options() -> List[click.Parameter]:
    """Data in before the ranks start, out while they run and after (SPEC §10)."""
    return [
        click.Option(
            ["--stage-in"],
            type=Checked("pair", lambda text: parse_pairs([text], "--stage-in")),
            multiple=True,
            metavar="LOCAL=URL",
            help="Copy URL (s3://, obs://, file://, any fsspec URL) to LOCAL, relative to the "
            "launch directory, before any rank starts; skipped when unchanged (repeatable).",
        ),
        click.Option(
            ["--stage-out"],
            type=Checked("pair", lambda text: parse_pairs([text], "--stage-out")),
            multiple=True,
            metavar="LOCAL=URL",
            help="Upload LOCAL to URL after the ranks end (success, failure, SIGTERM); node 0 "
            "alone unless LOCAL holds {node} or {rank} (repeatable).",
        ),
        click.Option(
            ["--path-mapping"],
            type=Path(dir_okay=False, readable=False),  # the reader says 66, not 64
            metavar="FILE",
            help="X2MindSpore's path_mapping_config.py (read, never run), or its input and "
            "output tables as JSON or TOML.",
        ),
        click.Option(
            ["--sync-interval"],
            type=Seconds(),
            default=0.0,
            show_default=True,
            help="Upload the --stage-out outputs every this many seconds while the ranks run "
            "(0: only at the end).",
        ),
    ]


def cpu_options() -> List[click.Parameter]:
    """Binding each local process to CPUs (SPEC §5, docs/cpu-binding.md)."""
    return [
        click.Option(
            ["--cpu-bind"],
            type=Checked("mode", lambda text: parse_cpu_bind(text, "--cpu-bind")),
            default="none",
            show_default=True,
            metavar="none|even|numa|LIST",
            help="Bind each rank to CPUs of this launcher's own: even splits them into "
            "contiguous ranges, numa takes the NUMA node of the rank's GPU/NPU, LIST gives one "
            "per local rank (0-23,24-47; 0-23:48-71 joins ranges). Services are not bound.",
        ),
        click.Option(
            ["--npu-smi"],
            type=Path(dir_okay=False),
            metavar="PATH",
            help="The npu-smi that --cpu-bind numa asks for Ascend NPUs' CPU affinity "
            "[default: npu-smi on PATH]",
        ),
        click.Option(
            ["--sysfs-root"],
            type=Path(file_okay=False),
            default="/",
            show_default=True,
            metavar="DIR",
            help="For tests: read sys/ and proc/self/status under DIR, not /, for --cpu-bind.",
        ),
    ]
