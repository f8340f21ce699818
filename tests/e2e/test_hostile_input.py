"""Hostile input (issue 13): no traceback, no hang, no misread.

Table-driven: every case runs the installed ``malaunch`` in a clean environment, with a
20-second limit (a hang fails the case instead of blocking the suite), and checks that the
launcher answers with the documented exit code (SPEC §3: 64 usage, 65 malformed input, 66 an
unusable input file, 69 not ready; never 1, never the catch-all 70), exactly one
``malaunch: error:`` line on stderr naming the culprit (the option, its ``MALAUNCH_``
variable, the platform variable, the file or the JSON path), and no traceback anywhere.

Classes: command-line values (core, framework and ``simulate`` options, their environment
twins, click's own errors: the ranges and meanings of each option here, while the classes of
bad values, empty, whitespace, huge, negative, other scripts' digits, control characters,
special files, wrong types, are generated for every option by ``test_hostile_generated.py``),
platform environment variables (Volcano, ModelArts, TF PS, Slurm, MindX, visible devices,
``RANK_TABLE_FILE`` pointing at special files), JSON variables
(``TF_CONFIG``, ``DATASET_MAP``, the legacy ``DATASET_PATH`` literal) and rank tables.
``MALAUNCH_CONTEXT`` is read by :mod:`malaunch.context`, not by the command, so it is not here.
Planning cases use ``--dry-run`` (nothing starts); the rest use ``topology --json`` or
``ranktable validate``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import pytest

from malaunch.testing import CliResult, clean_env, run_cli

TIMEOUT = 20.0
ERROR = "malaunch: error: "
SHARED = Path(__file__).parents[1] / "fixtures" / "shared"
COMMAND = ("--", "python", "train.py")
# Launch cases that plan only; cases that would start something run `true` instead.
DRY = ("--framework", "torch_ddp", "--topology", "local", "--dry-run")
RUN = ("--framework", "torch_ddp", "--topology", "local", "--log-dir", "{tmp}/logs")
HARMLESS = ("--", "true")
TOPOLOGY = ("topology", "--json", "--topology")
VALIDATE = ("ranktable", "validate", "{table}")

# Digits int() and float() take but a platform never writes (RUF001: spelled as escapes).
AR = {n: chr(0x0660 + n) for n in range(10)}  # ARABIC-INDIC DIGIT n
HUGE = "9" * 5000  # past Python's 4,300-digit int() limit
DEEP_LIST = "[" * 100_000  # deeper than json can nest (an env value holds at most 128 KiB)


@dataclasses.dataclass(frozen=True)
class Case:
    """One hostile input: how malaunch is run, and how it must refuse.

    ``{tmp}`` (the test's directory) and ``{table}`` (``{tmp}/table.json``, written from
    ``table`` when given) are expanded in ``args``, ``env`` and ``culprit``.
    """

    id: str
    args: Tuple[str, ...]
    code: int
    culprit: Tuple[str, ...]  # each must appear in the error line
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    table: Optional[bytes] = None
    setup: Optional[Callable[[Path], None]] = None
    says: str = ""  # what the line must also say (alternatives: "a|b"), case-insensitive

    def param(self) -> Any:
        return pytest.param(self, id=self.id)


def expand(text: str, tmp: Path) -> str:
    return text.replace("{table}", str(tmp / "table.json")).replace("{tmp}", str(tmp))


def assert_refused(result: CliResult, code: int, culprit: Sequence[str], says: str = "") -> None:
    """The exit code, one error line naming the culprit, no traceback."""
    shown = f"exit {result.code}\nstderr: {result.stderr[:2000]!r}\nstdout: {result.stdout[:300]!r}"
    assert "Traceback" not in result.stderr + result.stdout, shown
    assert result.code == code, shown
    lines = result.stderr.splitlines()
    assert len(lines) == 1, shown
    assert lines[0].startswith(ERROR), shown
    for name in culprit:
        assert name in lines[0], f"{name!r} not named in the error line\n{shown}"
    assert any(word in lines[0].lower() for word in says.lower().split("|")), shown


def run_case(case: Case, tmp: Path) -> CliResult:
    if case.table is not None:
        (tmp / "table.json").write_bytes(case.table)
    if case.setup is not None:
        case.setup(tmp)
    env = clean_env({"MALAUNCH_VOLCANO_DIR": str(tmp)})  # an empty /etc/volcano
    env.update({key: expand(value, tmp) for key, value in case.env.items()})
    args = [expand(arg, tmp) for arg in case.args]
    return run_cli(args, env=env, cwd=tmp, timeout=TIMEOUT)


# --- command-line values ------------------------------------------------------------------


def dry(case_id: str, *options: str, framework: str = "torch_ddp", culprit: str = "") -> Case:
    """A launch option on a local dry run; the culprit defaults to the option."""
    args = ("--framework", framework, *DRY[2:], *options, *COMMAND)
    return Case(case_id, args, 64, (culprit or options[0],))


def run(case_id: str, *options: str, culprit: str = "", **env: str) -> Case:
    """A local launch of `true` (for what only a launch checks); nothing starts on refusal."""
    return Case(case_id, (*RUN, *options, *HARMLESS), 64, (culprit or options[0],), env=env)


def twin(case_id: str, name: str, value: str, framework: str = "torch_ddp") -> Case:
    """A launch option given through its MALAUNCH_ variable: the line names the variable."""
    args = ("--framework", framework, *DRY[2:], *COMMAND)
    return Case(case_id, args, 64, (name,), env={name: value})


def waiting(case_id: str, *options: str) -> Case:
    """A launch whose rank table is not there yet: a bad option must not cost the wait."""
    args = (*RUN[:3], "ranktable", "--wait-timeout", "1", *options, *HARMLESS)
    return Case(case_id, args, 64, (options[0],), env={"RANK_TABLE_FILE": "{tmp}/missing.json"})


def tool(case_id: str, args: Tuple[str, ...], culprit: str, says: str = "", **env: str) -> Case:
    """A tool command (or click itself) refusing its command line."""
    return Case(case_id, args, 64, (culprit,), env=env, says=says)


def simulate(case_id: str, option: str, value: str) -> Case:
    args = ("simulate", "--nodes", "2", "--platform", "modelarts", option, value,
            "--framework", "torch_ddp", "--print-env", *HARMLESS)  # fmt: skip
    return Case(f"simulate-{case_id}", args, 64, (option,))


# Classes of bad values (nan, negative, other scripts' digits, empty, 5,000 digits, ...) are
# generated for every option by test_hostile_generated.py; these are the ranges.
BAD_SECONDS = {
    "over-24.8-days": "2200000",
}
DURATIONS = (
    "--grace-period",
    "--wait-timeout",
    "--min-uptime",
    "--heartbeat-timeout",
    "--hang-timeout",
    "--hang-startup-timeout",
)
BAD_INTEGERS = {
    "1e9": "1000000000",
}
INTEGERS = ("--nproc-per-node", "--master-port", "--max-restarts", "--job-port")
# (option, label, value): refused by a local dry run.
BAD_VALUES = (
    ("--nproc-per-node", "0", "0"),
    ("--master-port", "65536", "65536"),
    ("--job-port", "0", "0"),
    ("--forward-signals", "unknown", "FOO"),
    ("--forward-signals", "SIG_DFL", "SIG_DFL"),
    ("--forward-signals", "number", "9"),
    ("--forward-signals", "shell", "$(id)"),
    ("--restart-backoff", "max-below-base", "5:1"),
    ("--restart-backoff", "colon", ":"),
    ("--restart-backoff", "three-parts", "1:2:3"),
    ("--restart-backoff", "max-nan", "1:nan"),
    ("--restart-on", "256", "256"),
    ("--restart-on", "backwards", "9-1"),
    ("--restart-on", "SIG_DFL", "SIG_DFL"),
    ("--restart-on", "comma", ","),
    ("--restart-on", "empty-item", "1,,2"),
    ("--restart-on", "huge-range", "0-999999999999"),
    ("--restart-on", "unknown-signal", "SIGFOO"),
    ("--env", "no-equals", "A"),
    ("--env", "no-key", "=1"),
    ("--env", "digit-first", "1A=2"),
    ("--env", "dash", "A-B=1"),
    ("--env", "space", "A B=1"),
    ("--env", "shell", "$(id)=1"),
    ("--master-addr", "shell", "$(id)"),
    ("--master-addr", "space", "a b"),
    ("--master-addr", "dash-first", "-x"),
    ("--master-addr", "five-numbers", "1.2.3.4.5"),
    ("--master-addr", "256", "256.1.1.1"),
    ("--master-addr", "with-port", "host:80"),
    ("--master-addr", "ipv6-with-port", "[fe80::1]:22"),
    ("--master-addr", "empty-label", "a..b"),
    ("--master-addr", "semicolon", "a;rm -rf /"),
    ("--master-addr", "bad-ipv6", "zz::1"),
    ("--log-dir", "a-file", "/etc/passwd"),
    ("--hang-stacks", "shell", "$(id)"),
    ("--hang-startup-timeout", "without---hang-timeout", "5"),
)
# A launch and a dry run refuse a bad --console-ranks alike (cases below use a launch).
BAD_CONSOLE_RANKS = {
    "arabic-digit": AR[3],
    "0-999999999999": "0-999999999999",
    "backwards": "5-3",
    "underscore": "1_0",
    "word": "a",
    "negative": "-1",
    "empty-item": "1,,2",
    "1001-items": ",".join(["1"] * 1001),
    "arabic-range": f"{AR[1]}-{AR[2]}",
    "exponent": "0-1e3",
}
FRAMEWORK_OPTIONS = (
    ("mindspore", "--ms-sched-port", "arabic-digits", AR[3] * 4),
    ("mindspore", "--ms-sched-port", "below-1024", "80"),
    ("mindspore", "--ms-topo-timeout", "nan", "nan"),
    ("mindspore", "--ms-topo-timeout", "over-7-days", "9999999999"),
    ("mindspore", "--ms-mode", "unknown", "$(id)"),
    ("tensorflow_ps", "--num-ps", "1e9", "1000000000"),
    ("tensorflow_ps", "--num-workers", "underscore", "1_0"),
    ("torch_ddp", "--torch-mode", "unknown", "x"),
)
TWINS = (
    ("MALAUNCH_HEARTBEAT_TIMEOUT", "0", "0"),
    ("MALAUNCH_NPROC_PER_NODE", "1e9", "1000000000"),
    ("MALAUNCH_JOB_PORT", "0", "0"),
    ("MALAUNCH_LOG_DIR", "a-file", "/etc/passwd"),
)
SIMULATE_OPTIONS = (
    ("--nodes", "0", "0"),
    ("--nodes", "1025", "1025"),
    ("--first-device-id", "16", "16"),
    ("--num-ps", "0", "0"),
    ("--nproc-per-node", "1e8", "100000000"),
)

BAD_PREFIXES = {
    "index": "{rank[0]}",
    "attribute": "{host.x}",
    "numeric-format": "{rank:d}",
    "hex-format-of-text": "{role:x}",
    "huge-width": "{rank:>999999999}",
    "5000-digit-width": "{rank:" + "9" * 5000 + "}",  # int() past its limit: exit 70 before
    "nested-field": "{rank:{host}}",
    "lone-brace": "{",
}

CLI_CASES: List[Case] = [
    *(dry(f"{o}={label}", o, value) for o in DURATIONS for label, value in BAD_SECONDS.items()),
    *(dry(f"{o}={label}", o, value) for o in INTEGERS for label, value in BAD_INTEGERS.items()),
    *(dry(f"{option}={label}", option, value) for option, label, value in BAD_VALUES),
    *(run(f"--console-ranks={label}", "--console-ranks", value)
      for label, value in BAD_CONSOLE_RANKS.items()),
    run("--forward-signals=SIGKILL", "--forward-signals", "SIGKILL"),
    # Prefix templates that formatted a sample but not every rank (70 once the ranks ran), or
    # that reach into a field, or build a gigabyte per line.
    *(run(f"--console-prefix={label}", "--console-prefix", value)
      for label, value in BAD_PREFIXES.items()),
    *(dry(f"{option}={label}", option, value, framework=framework)
      for framework, option, label, value in FRAMEWORK_OPTIONS),
    # Environment twins: the line names the variable, since no option was typed.
    *(twin(f"{name}={label}", name, value) for name, label, value in TWINS),
    twin("MALAUNCH_MS_TOPO_TIMEOUT=arabic-digit", "MALAUNCH_MS_TOPO_TIMEOUT", AR[1], "mindspore"),
    # click's own errors: one line, naming what is wrong.
    tool("unknown-option", ("--framework", "torch_ddp", "--bogus"), "--bogus"),
    tool("option-without-value", ("--framework", "torch_ddp", "--nproc-per-node"),
         "--nproc-per-node"),
    tool("unknown-subcommand", ("ranktable", "frob"), "frob"),
    tool("unknown-tool-option", ("plugins", "--json", "--x"), "--x"),
    # A missing required option or argument: one line that names it and says so.
    tool("simulate-without---nodes", ("simulate", "--platform", "volcano", "--framework",
         "torch_ddp", "--print-env", *HARMLESS), "--nodes", says="required|missing"),
    tool("validate-without-file", ("ranktable", "validate"), "FILE", says="required|missing"),
    tool("convert-without-target", ("ranktable", "convert", "{tmp}/in.json"), "TARGET",
         says="required|missing"),
    # simulate: its own options and the launch options it passes on.
    *(simulate(f"{option}={label}", option, value) for option, label, value in SIMULATE_OPTIONS),
    # --console-ranks and --forward-signals are checked while click parses: a dry run refuses
    # them too, and a launch refuses them before it waits for its topology (64, not 69).
    dry("--console-ranks=arabic-digit-dry-run", "--console-ranks", AR[3]),
    dry("--console-ranks=0-999999999999-dry-run", "--console-ranks", "0-999999999999"),
    dry("--forward-signals=SIGKILL-dry-run", "--forward-signals", "SIGKILL"),
    waiting("--console-ranks-before-the-wait", "--console-ranks", AR[3]),
    waiting("--forward-signals-before-the-wait", "--forward-signals", "SIGSTOP"),
    # --restart-backoff follows the duration rules: no underscores, other scripts' digits or
    # spaces, and at most 7 days (1e300 would overflow sleep() at the first restart).
    dry("--restart-backoff=underscore", "--restart-backoff", "1_0"),
    dry("--restart-backoff=arabic-digit", "--restart-backoff", AR[3]),
    dry("--restart-backoff=leading-space", "--restart-backoff", " 1"),
    dry("--restart-backoff=1e300", "--restart-backoff", "1e300"),
    dry("--restart-backoff=over-24.8-days", "--restart-backoff", "2200000"),
    dry("--restart-backoff=max-1e300", "--restart-backoff", "1:1e300"),
    Case("--restart-backoff=1e300-at-restart", (*RUN, "--max-restarts", "1",
         "--restart-backoff", "1e300", "--", "false"), 64, ("--restart-backoff",)),
    # --env names are ASCII: str.isalnum() would take letters and digits of other scripts.
    dry("--env=non-ascii-name", "--env", "\u00c9=1"),
    dry("--env=arabic-digit-in-name", "--env", f"A{AR[1]}=1"),
    # An IPv6 zone (after "%") is checked too: shell syntax and spaces are not an address.
    dry("--master-addr=ipv6-zone-shell", "--master-addr", "fe80::1%$(id)"),
    dry("--master-addr=ipv6-zone-space", "--master-addr", "[fe80::1%a b]"),
    # Values checked outside click name the option even when they came from MALAUNCH_*.
    twin("MALAUNCH_RESTART_BACKOFF=nan", "MALAUNCH_RESTART_BACKOFF", "nan"),
    twin("MALAUNCH_RESTART_ON=unknown", "MALAUNCH_RESTART_ON", "x"),
    twin("MALAUNCH_FORWARD_SIGNALS=unknown", "MALAUNCH_FORWARD_SIGNALS", "FOO"),
    twin("MALAUNCH_ENV=no-equals", "MALAUNCH_ENV", "A"),
    run("MALAUNCH_CONSOLE_RANKS=arabic-digit", culprit="MALAUNCH_CONSOLE_RANKS",
        MALAUNCH_CONSOLE_RANKS=AR[3]),
    # Tool commands read MALAUNCH_<COMMAND>_<OPTION>; the line names MALAUNCH_<OPTION>.
    tool("MALAUNCH_TOPOLOGY_WAIT_TIMEOUT=nan", ("topology", "--json"),
         "MALAUNCH_TOPOLOGY_WAIT_TIMEOUT", MALAUNCH_TOPOLOGY_WAIT_TIMEOUT="nan"),
    tool("MALAUNCH_TOPOLOGY_NPROC_PER_NODE=arabic-digit", ("topology", "--json"),
         "MALAUNCH_TOPOLOGY_NPROC_PER_NODE", MALAUNCH_TOPOLOGY_NPROC_PER_NODE=AR[3]),
]  # fmt: skip

# --- platform environment variables ------------------------------------------------------

VOLCANO = {"VC_WORKER_HOSTS": "a,b", "VC_TASK_INDEX": "0"}
TF_PS = {
    "TF_PS_HOSTS": "ps0:2222",
    "TF_WORKER_HOSTS": "w0:2222,w1:2222",
    "MA_TASK_NAME": "worker",
    "VC_TASK_INDEX": "1",
}
SLURM = {"SLURM_JOB_NODELIST": "node[01-04]", "SLURM_NODEID": "1"}
MINDX = {
    "MS_ROLE": "MS_WORKER",
    "MS_SCHED_HOST": "10.0.0.1",
    "MS_SCHED_PORT": "2222",
    "MS_WORKER_NUM": "16",
    "MS_LOCAL_WORKER": "8",
    "MS_NODE_RANK": "1",
}
BASES = {"volcano": VOLCANO, "tf-ps": TF_PS, "slurm": SLURM, "mindx": MINDX}


def source(case_id: str, name: str, changes: Mapping[str, str], culprit: str = "") -> Case:
    """``topology --json`` of one source on its valid base environment plus ``changes``."""
    env = {**BASES[name], **changes}
    return Case(case_id, (*TOPOLOGY, name), 65, (culprit or next(iter(changes)),), env=env)


def launch(case_id: str, name: str, changes: Mapping[str, str]) -> Case:
    """The same through a torch_ddp dry run."""
    args = ("--framework", "torch_ddp", "--topology", name, "--dry-run", *COMMAND)
    return Case(case_id, args, 65, (next(iter(changes)),), env={**BASES[name], **changes})


def make_fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "fifo")


def make_dir_with_fifo(tmp: Path) -> None:
    (tmp / "dir").mkdir()
    os.mkfifo(tmp / "dir" / "jobstart_hccl.json")


MINDSPORE_ON_TABLE = (
    "--framework", "mindspore", "--topology", "ranktable", "--wait-timeout", "0",
    "--log-dir", "{tmp}/logs", "--dry-run", *COMMAND,
)  # fmt: skip


def table_file(
    case_id: str, code: int, culprit: str, setup: Optional[Callable[[Path], None]] = None,
    args: Tuple[str, ...] = MINDSPORE_ON_TABLE, **env: str,
) -> Case:  # fmt: skip
    """A rank table variable (or ``ranktable`` argument) naming something unusable."""
    return Case(case_id, args, code, (culprit,), env=env, setup=setup)


# (source, variable, label, value): refused by ``topology --json --topology SOURCE``.
SOURCE_VALUES = (
    ("volcano", "VC_TASK_INDEX", "underscore", "1_0"),
    ("volcano", "VC_TASK_INDEX", "arabic-digit", AR[1]),
    ("volcano", "VC_TASK_INDEX", "negative", "-1"),
    ("volcano", "VC_TASK_INDEX", "5000-digits", HUGE),
    ("volcano", "VC_TASK_INDEX", "out-of-range", "5"),
    ("volcano", "VC_TASK_INDEX", "float", "1.0"),
    ("volcano", "MA_NUM_GPUS", "1e8", "100000000"),
    ("volcano", "MA_NUM_GPUS", "underscore", "1_0"),
    ("volcano", "MA_NUM_GPUS", "arabic-digit", AR[1]),
    ("volcano", "MA_NUM_GPUS", "5000-digits", HUGE),
    ("volcano", "MA_NUM_HOSTS", "mismatch", "3"),
    ("volcano", "MA_NUM_HOSTS", "arabic-digit", AR[2]),
    ("volcano", "MA_NUM_HOSTS", "0", "0"),
    ("volcano", "VC_WORKER_NUM", "underscore", "1_0"),
    ("volcano", "VC_WORKER_PORT", "0", "0"),
    ("volcano", "VC_WORKER_PORT", "65536", "65536"),
    ("volcano", "VC_WORKER_PORT", "arabic-digit", AR[1]),
    ("volcano", "VC_WORKER_HOSTS", "shell", "$(id),b"),
    ("volcano", "VC_WORKER_HOSTS", "backticks", "`id`,b"),
    ("volcano", "VC_WORKER_HOSTS", "space", "a b,c"),
    ("volcano", "VC_WORKER_HOSTS", "control", "a\x01,b"),
    ("volcano", "VC_WORKER_HOSTS", "empty-item", "a,,b"),
    ("volcano", "VC_WORKER_HOSTS", "only-comma", ","),
    ("volcano", "VC_WORKER_HOSTS", "empty-brackets", "[]"),
    ("volcano", "VC_WORKER_HOSTS", "with-port", "a:80,b"),
    ("volcano", "VC_WORKER_HOSTS", "semicolon", "a;rm -rf /,b"),
    ("volcano", "VC_WORKER_HOSTS", "arabic-digits", f"{AR[1]}{AR[2]}.example,b"),
    ("volcano", "VC_WORKER_HOSTS", "non-utf8", "a\udcff,b"),
    ("volcano", "CUDA_VISIBLE_DEVICES", "twice", "0,0"),
    ("volcano", "CUDA_VISIBLE_DEVICES", "arabic-digit", AR[1]),
    ("volcano", "CUDA_VISIBLE_DEVICES", "space", "0, 1"),
    ("volcano", "ASCEND_RT_VISIBLE_DEVICES", "descending", "1,0"),
    ("volcano", "ASCEND_RT_VISIBLE_DEVICES", "underscore", "1_0"),
    ("volcano", "ASCEND_RT_VISIBLE_DEVICES", "10001-devices", ",".join(map(str, range(10001)))),
    ("volcano", "ASCEND_RT_VISIBLE_DEVICES", "5000-digits", HUGE),
    ("tf-ps", "TF_PS_HOSTS", "shell", "$(id):2222"),
    ("tf-ps", "TF_PS_HOSTS", "arabic-port", f"ps0:{AR[2]}{AR[2]}"),
    ("tf-ps", "TF_PS_HOSTS", "underscore-port", "ps0:1_0"),
    ("tf-ps", "TF_PS_HOSTS", "port-99999", "ps0:99999"),
    ("tf-ps", "TF_PS_HOSTS", "no-port", "ps0"),
    ("tf-ps", "TF_PS_HOSTS", "unclosed-ipv6", "[::1:2222"),
    ("tf-ps", "TF_PS_HOSTS", "bare-ipv6", "::1:2222"),
    ("tf-ps", "TF_PS_HOSTS", "bad-ipv6", "[zz::1]:2222"),
    ("tf-ps", "TF_PS_HOSTS", "space", "ps 0:2222"),
    ("tf-ps", "TF_PS_HOSTS", "newline", "ps0\n:2222"),
    ("tf-ps", "TF_PS_HOSTS", "trailing-comma", "ps0:2222,"),
    ("tf-ps", "TF_PS_HOSTS", "one-quote", "'ps0:2222"),
    ("tf-ps", "TF_PS_HOSTS", "nested-brackets", "[[[[]]]]"),
    ("tf-ps", "VC_TASK_INDEX", "underscore", "1_0"),
    ("tf-ps", "VC_TASK_INDEX", "arabic-digit", AR[1]),
    ("tf-ps", "MA_TASK_NAME", "unknown-role", "chief"),
    ("tf-ps", "MA_TASK_NAME", "shell", "$(id)"),
    ("slurm", "SLURM_JOB_NODELIST", "1e6-nodes", "node[1-1000000]"),
    ("slurm", "SLURM_JOB_NODELIST", "guard-plus-one", "node[1-100000],x"),
    ("slurm", "SLURM_JOB_NODELIST", "product", "a[1-1000]b[1-1000]"),
    ("slurm", "SLURM_JOB_NODELIST", "arabic-range", f"n[{AR[1]}-{AR[2]}]"),
    ("slurm", "SLURM_JOB_NODELIST", "underscore", "n[1_0]"),
    ("slurm", "SLURM_JOB_NODELIST", "5000-digits", f"n[{HUGE}]"),
    ("slurm", "SLURM_JOB_NODELIST", "30-digit-bound", "n[1-" + "9" * 30 + "]"),
    ("slurm", "SLURM_JOB_NODELIST", "backwards", "n[5-1]"),
    ("slurm", "SLURM_JOB_NODELIST", "unclosed", "n[1-2"),
    ("slurm", "SLURM_JOB_NODELIST", "close-first", "n]1["),
    ("slurm", "SLURM_JOB_NODELIST", "nested", "n[[1]]"),
    ("slurm", "SLURM_JOB_NODELIST", "empty-item", "n[1-2],,m"),
    ("slurm", "SLURM_JOB_NODELIST", "empty-group", "n[]"),
    ("slurm", "SLURM_JOB_NODELIST", "dash-only", "n[-]"),
    ("slurm", "SLURM_NODEID", "arabic-digit", AR[1]),
    ("slurm", "SLURM_NODEID", "underscore", "1_0"),
    ("slurm", "SLURM_NODEID", "5000-digits", HUGE),
    ("slurm", "SLURM_NODEID", "out-of-range", "4"),
    ("slurm", "SLURM_TASKS_PER_NODE", "arabic-repeat", f"8(x{AR[4]})"),
    ("slurm", "SLURM_TASKS_PER_NODE", "repeat-4e9", "8(x4000000000)"),
    ("slurm", "SLURM_TASKS_PER_NODE", "1e5-per-node", "100000(x4)"),
    ("slurm", "SLURM_TASKS_PER_NODE", "underscore", "1_0(x4)"),
    ("slurm", "SLURM_TASKS_PER_NODE", "repeat-0", "8(x0)"),
    ("slurm", "SLURM_TASKS_PER_NODE", "zero-tasks", "0(x4)"),
    ("slurm", "SLURM_TASKS_PER_NODE", "count-mismatch", "8(x3)"),
    ("slurm", "SLURM_TASKS_PER_NODE", "past-guard", ",".join(["1(x100000)"] * 3)),
    ("slurm", "SLURM_GPUS_ON_NODE", "1e8", "100000000"),
    ("slurm", "SLURM_GPUS_ON_NODE", "arabic-digit", AR[8]),
    ("slurm", "SLURM_NTASKS_PER_NODE", "0", "0"),
    ("slurm", "SLURM_NTASKS_PER_NODE", "underscore", "1_0"),
    ("slurm", "SLURM_JOB_NUM_NODES", "arabic-digit", AR[4]),
    ("slurm", "SLURM_JOB_NUM_NODES", "mismatch", "5"),
    ("slurm", "SLURM_NNODES", "30-digits", "9" * 30),
    ("slurm", "SLURM_LOCALID", "second-launcher", "1"),
    ("slurm", "SLURM_LOCALID", "arabic-digit", AR[1]),
    ("mindx", "MS_LOCAL_WORKER", "arabic-digit", AR[8]),
    ("mindx", "MS_SCHED_HOST", "shell", "$(id)"),
    ("mindx", "MS_SCHED_HOST", "space", "a b"),
    ("mindx", "MS_SCHED_PORT", "underscore", "1_0"),
    ("mindx", "MS_NODE_RANK", "5000-digits", HUGE),
    ("mindx", "MS_NODE_RANK", "out-of-range", "2"),
    ("mindx", "MS_ROLE", "parameter-server", "MS_PSERVER"),
    ("mindx", "MS_WORKER_NUM", "not-a-multiple", "17"),
    ("mindx", "MS_WORKER_NUM", "0", "0"),
    ("mindx", "ASCEND_VISIBLE_DEVICES", "arabic-digit", f"0,{AR[1]}"),
    ("mindx", "ASCEND_VISIBLE_DEVICES", "empty-item", "0,,1"),
)

ENV_CASES: List[Case] = [
    *(source(f"{src}-{name}={label}", src, {name: value})
      for src, name, label, value in SOURCE_VALUES),
    # The issue's own examples, through a launch.
    launch("launch-MA_NUM_GPUS=1e8", "volcano", {"MA_NUM_GPUS": "100000000"}),
    launch("launch-SLURM_JOB_NODELIST=1e6-nodes", "slurm",
           {"SLURM_JOB_NODELIST": "node[1-1000000]"}),
    # Two TF tasks on one host:port (case-blind): the line names the address.
    source("tf-ps-ps-and-worker-share", "tf-ps", {"TF_PS_HOSTS": "w0:2222"}, "w0:2222"),
    source("tf-ps-duplicate-worker", "tf-ps", {"TF_WORKER_HOSTS": "w0:2222,w0:2222"}, "w0:2222"),
    source("tf-ps-duplicate-worker-case", "tf-ps", {"TF_WORKER_HOSTS": "W0:2222,w0:2222"},
           "w0:2222"),
    source("tf-ps-chief-and-worker-share", "tf-ps", {"TF_CHIEF_HOSTS": "w1:2222"}, "w1:2222"),
    # Rank table variables naming no rank table: refused at once, never read or waited on.
    table_file("RANK_TABLE_FILE=fifo", 66, "{tmp}/fifo", make_fifo, RANK_TABLE_FILE="{tmp}/fifo"),
    table_file("RANK_TABLE_FILE=dev-zero", 66, "/dev/zero", RANK_TABLE_FILE="/dev/zero"),
    table_file("RANK_TABLE_FILE=dev-null", 66, "/dev/null", RANK_TABLE_FILE="/dev/null"),
    table_file("RANK_TABLE_FILE=dev-stdin", 66, "/dev/stdin", RANK_TABLE_FILE="/dev/stdin"),
    table_file("RANK_TABLE_FILE=dir-holding-a-fifo", 66, "{tmp}/dir/jobstart_hccl.json",
               make_dir_with_fifo, RANK_TABLE_FILE="{tmp}/dir"),
    table_file("RANK_TABLE_FILE_V_1_0=fifo", 66, "{tmp}/fifo", make_fifo,
               RANK_TABLE_FILE_V_1_0="{tmp}/fifo"),
    table_file("RANK_TABLE_FILE_V_1_0=directory", 65, "RANK_TABLE_FILE_V_1_0",
               RANK_TABLE_FILE_V_1_0="{tmp}"),
    table_file("RANK_TABLE_FILE=missing", 69, "RANK_TABLE_FILE",
               RANK_TABLE_FILE="{tmp}/missing.json"),
    table_file("RANK_TABLE_FILE=empty-directory", 69, "RANK_TABLE_FILE", RANK_TABLE_FILE="{tmp}"),
    table_file("RANK_TABLE_FILE=proc-environ", 69, "/proc/self/environ",
               RANK_TABLE_FILE="/proc/self/environ"),
    table_file("validate-fifo", 66, "{tmp}/fifo", make_fifo,
               args=("ranktable", "validate", "{tmp}/fifo")),
    table_file("validate-directory", 66, "{tmp}", args=("ranktable", "validate", "{tmp}")),
    table_file("validate-dev-zero", 66, "/dev/zero", args=("ranktable", "validate", "/dev/zero")),
    table_file("validate-missing", 66, "{tmp}/missing.json",
               args=("ranktable", "validate", "{tmp}/missing.json")),
    table_file("convert-dev-zero", 66, "/dev/zero",
               args=("ranktable", "convert", "/dev/zero", "{tmp}/out.json")),
    # Slurm node names are checked as host names.
    source("SLURM_JOB_NODELIST=shell", "slurm",
           {"SLURM_JOB_NODELIST": "$(id),b", "SLURM_NODEID": "0"}),
    source("SLURM_JOB_NODELIST=control", "slurm",
           {"SLURM_JOB_NODELIST": "a\x01[1-2]", "SLURM_NODEID": "0"}),
    source("SLURM_JOB_NODELIST=semicolon", "slurm",
           {"SLURM_JOB_NODELIST": "n;id[1-2]", "SLURM_NODEID": "0"}),
    # An IPv6 zone (after "%") is checked too: no shell syntax, spaces or control characters.
    source("VC_WORKER_HOSTS=ipv6-zone-shell", "volcano", {"VC_WORKER_HOSTS": "fe80::1%$(id),b"}),
    source("TF_PS_HOSTS=ipv6-zone-control", "tf-ps", {"TF_PS_HOSTS": "[fe80::1%\x01]:2222"}),
    source("MS_SCHED_HOST=ipv6-zone-space", "mindx", {"MS_SCHED_HOST": "fe80::1%a b"}),
    # MS_WORKER_NUM is held to MAX_WORLD_SIZE (800,000 pods would take minutes to build).
    source("MS_WORKER_NUM=6.4e6", "mindx", {"MS_WORKER_NUM": "6400000"}),
    # Nodes and processes per node each within bounds, their product 10^9 ranks: refused
    # before any is built.
    Case("PET_NNODES*PET_NPROC_PER_NODE=1e9", (*TOPOLOGY, "kubeflow"), 65,
         ("PET_NNODES", "PET_NPROC_PER_NODE", "at most 200000"),
         env={"PET_NNODES": "100000", "PET_NPROC_PER_NODE": "10000", "PET_NODE_RANK": "3",
              "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "23456"}),
    # Without PET_NNODES, a WORLD_SIZE beside LOCAL_RANK counts processes: never nodes. Both
    # values are cut in the line (5000 digits; a 5000-item list).
    Case("kubeflow-WORLD_SIZE-beside-LOCAL_RANK", (*TOPOLOGY, "kubeflow"), 65,
         (f"WORLD_SIZE={'9' * 40}...", "LOCAL_RANK=0,1,2,3,", "mindx-pytorch"),
         env={"WORLD_SIZE": HUGE, "RANK": "1", "MASTER_ADDR": "10.0.0.1",
              "LOCAL_RANK": ",".join(map(str, range(5000)))}),
    # auto: a sign whose value is no plain count is no proof of being alone; the line cuts it.
    Case("auto-WORLD_SIZE=5000-digits", ("topology", "--json"), 65,
         (f"WORLD_SIZE={'9' * 40}...",), env={"WORLD_SIZE": HUGE}, says="distributed job"),
    Case("auto-PMIX_RANK=arabic-digit", ("topology", "--json"), 65, (f"PMIX_RANK={AR[1]}",),
         env={"PMIX_RANK": AR[1]}, says="distributed job"),
    Case("auto-MS_SCHED_HOST=shell", ("topology", "--json"), 65,
         ("MS_SCHED_HOST=$(id)", "--topology mindx"),
         env={"MS_ROLE": "MS_WORKER", "MS_SCHED_HOST": "$(id)"}, says="distributed job"),
    source("SLURM_JOB_NODELIST*SLURM_NTASKS_PER_NODE=1e9", "slurm",
           {"SLURM_JOB_NODELIST": "n[0-99999]", "SLURM_NTASKS_PER_NODE": "10000"}),
    source("VC_WORKER_HOSTS*MA_NUM_GPUS", "volcano",
           {"VC_WORKER_HOSTS": ",".join(f"w{i}" for i in range(21)), "MA_NUM_GPUS": "10000"}),
    # ASCEND_VISIBLE_DEVICES listing a device twice would put two processes on one NPU.
    source("ASCEND_VISIBLE_DEVICES=twice", "mindx", {"ASCEND_VISIBLE_DEVICES": "0,1,2,3,4,5,6,6"}),
    # Two tasks on one host:port: the line names the variables, not only the source.
    Case("tf-ps-share-names-the-variables", (*TOPOLOGY, "tf-ps"), 65,
         ("TF_PS_HOSTS", "TF_WORKER_HOSTS"), env={**TF_PS, "TF_PS_HOSTS": "w0:2222"}),
    source("tf-ps-duplicate-names-the-variable", "tf-ps", {"TF_WORKER_HOSTS": "w0:2222,w0:2222"},
           "TF_WORKER_HOSTS"),
]  # fmt: skip

# --- JSON variables -----------------------------------------------------------------------


def tf_config(case_id: str, doc: Any = None, raw: Optional[str] = None, culprit: str = "") -> Case:
    """``TF_CONFIG`` (a document, or raw text) through the tf-config source."""
    text = raw if raw is not None else json.dumps(doc)
    return Case(case_id, (*TOPOLOGY, "tf-config"), 65, ("TF_CONFIG", culprit),
                env={"TF_CONFIG": text})  # fmt: skip


def tf_address(case_id: str, doc: Any) -> Case:
    """Two tasks on one address: the line names the address."""
    return Case(case_id, (*TOPOLOGY, "tf-config"), 65, ("w0:1",),
                env={"TF_CONFIG": json.dumps(doc)})  # fmt: skip


def cluster(workers: Any, task: Any = None, **more: Any) -> Dict[str, Any]:
    doc: Dict[str, Any] = {"cluster": {"worker": workers, **more}}
    doc["task"] = {"type": "worker", "index": 0} if task is None else task
    return doc


def worker_index(index: Any) -> Dict[str, Any]:
    return cluster(["w0:1"], {"type": "worker", "index": index})


def raw_index(text: str) -> str:
    return '{"cluster": {"worker": ["w0:1"]}, "task": {"type": "worker", "index": ' + text + "}}"


def data_var(case_id: str, name: str, value: str, culprit: str = "") -> Case:
    """``DATASET_MAP`` / ``DATASET_PATH`` read next to a valid Volcano topology."""
    return source(case_id, "volcano", {name: value}, culprit or name)


W0 = "cluster.worker[0]"
BAD_INDICES = {
    "underscore": "1_0",
    "arabic-digit": AR[0],
    "float": 1.5,
    "bool": True,
    "negative": -1,
    "null": None,
    "out-of-range": 1,
}

JSON_CASES: List[Case] = [
    tf_config("TF_CONFIG=deep-list", raw=DEEP_LIST),
    tf_config("TF_CONFIG=deep-object", raw='{"a":' * 20_000),
    tf_config("TF_CONFIG=deep-closed", raw="[" * 5000 + "]" * 5000),
    Case("launch-TF_CONFIG=deep", ("--framework", "tensorflow_ps", "--topology", "tf-config",
         "--dry-run", *COMMAND), 65, ("TF_CONFIG",), env={"TF_CONFIG": DEEP_LIST}),
    tf_config("TF_CONFIG=empty", raw=""),
    tf_config("TF_CONFIG=blank", raw="   "),
    tf_config("TF_CONFIG=null", raw="null"),
    tf_config("TF_CONFIG=array", raw="[]"),
    tf_config("TF_CONFIG=1e400", raw="1e400"),
    tf_config("TF_CONFIG=truncated", raw='{"cluster": {"worker": ["w0:1"'),
    tf_config("TF_CONFIG=empty-cluster", {"cluster": {}, "task": {}}, culprit="cluster"),
    tf_config("TF_CONFIG=cluster-list", {"cluster": [["worker"]], "task": {}}, culprit="cluster"),
    tf_config("TF_CONFIG=task-string", cluster(["w0:1"], "worker"), culprit="task"),
    tf_address("TF_CONFIG=duplicate-workers", cluster(["w0:1", "w0:1"])),
    tf_address("TF_CONFIG=ps-and-worker-share", cluster(["w0:1"], ps=["w0:1"])),
    tf_address("TF_CONFIG=share-case", cluster(["w0:1"], ps=["W0:1"])),
    tf_address("TF_CONFIG=10000-same-workers", cluster(["w0:1"] * 10_000)),
    tf_config("TF_CONFIG=host-shell", cluster(["$(id):1"]), culprit=W0),
    tf_config("TF_CONFIG=host-space", cluster(["w 0:1"]), culprit=W0),
    tf_config("TF_CONFIG=host-control", cluster(["w\u00010:1"]), culprit=W0),
    tf_config("TF_CONFIG=port-arabic", cluster([f"w0:{AR[1]}"]), culprit=W0),
    tf_config("TF_CONFIG=address-number", cluster([1]), culprit=W0),
    tf_config("TF_CONFIG=address-nested", cluster([[["w0:1"]]]), culprit=W0),
    tf_config("TF_CONFIG=role-string", cluster("w0:1"), culprit="cluster.worker"),
    *(tf_config(f"TF_CONFIG=index-{label}", worker_index(value), culprit="task.index")
      for label, value in BAD_INDICES.items()),
    *(tf_config(f"TF_CONFIG=index-{raw}", raw=raw_index(raw), culprit="task.index")
      for raw in ("NaN", "Infinity", "1e400")),
    tf_config("TF_CONFIG=sparse-key-huge", cluster({"99999999999": "w0:1"}),
              culprit="cluster.worker"),
    tf_config("TF_CONFIG=sparse-key-arabic", cluster({AR[1]: "w0:1"}), culprit="cluster.worker"),
    tf_config("TF_CONFIG=type-empty", {"cluster": {"": ["w0:1"]}, "task": {"type": ""}},
              culprit="task.type"),
    tf_config("TF_CONFIG=type-list", cluster(["w0:1"], {"type": ["worker"]}), culprit="task.type"),
    tf_config("TF_CONFIG=type-unknown", cluster(["w0:1"], {"type": "$(id)"}), culprit="task.type"),
    tf_config("TF_CONFIG=environment-number", {**cluster(["w0:1"]), "environment": 5},
              culprit="environment"),
    tf_config("TF_CONFIG=chief-and-master", cluster(["w0:1"], master=["m:1"], chief=["c:1"]),
              culprit="master"),
    data_var("DATASET_MAP=deep", "DATASET_MAP", DEEP_LIST),
    data_var("DATASET_MAP=array", "DATASET_MAP", "[1]"),
    data_var("DATASET_MAP=number-path", "DATASET_MAP", '{"a": 1}', 'DATASET_MAP["a"]'),
    data_var("DATASET_MAP=null-path", "DATASET_MAP", '{"a": null}', 'DATASET_MAP["a"]'),
    data_var("DATASET_MAP=blank-path", "DATASET_MAP", '{"a": "  "}', 'DATASET_MAP["a"]'),
    data_var("DATASET_MAP=truncated", "DATASET_MAP", "{"),
    data_var("DATASET_MAP=1e400", "DATASET_MAP", "1e400"),
    data_var("DATASET_PATH=numbers", "DATASET_PATH", "[1,2]"),
    data_var("DATASET_PATH=deep-parentheses", "DATASET_PATH", "(" * 1000),
    data_var("DATASET_PATH=deep-list", "DATASET_PATH", DEEP_LIST),
    data_var("DATASET_PATH=call", "DATASET_PATH", "__import__('os')"),
    data_var("DATASET_PATH=5000-digits", "DATASET_PATH", HUGE),
    # A number past 4,300 digits (json.loads' limit) is malformed input, 65, not a crash.
    tf_config("TF_CONFIG=5000-digit-number", raw=HUGE),
    tf_config("TF_CONFIG=index-5000-digits", raw=raw_index(HUGE), culprit="task.index"),
    data_var("DATASET_MAP=5000-digit-number", "DATASET_MAP", '{"a": ' + HUGE + "}"),
    # Sparse form: "1" and "01" are one task index: refused, never one replacing the other.
    tf_config("TF_CONFIG=sparse-same-index", cluster({"1": "w0:1", "01": "w1:1"},
              {"type": "worker", "index": 1}), culprit="cluster.worker"),
    # Two tasks on one host:port: the line names the JSON path in TF_CONFIG.
    tf_config("TF_CONFIG=duplicate-names-the-variable", cluster(["w0:1", "w0:1"]),
              culprit="cluster.worker[1]"),
    # What ast.literal_eval raises TypeError, MemoryError or RecursionError on is 65 too.
    data_var("DATASET_PATH=set-of-list", "DATASET_PATH", "{[]}"),
    data_var("DATASET_PATH=deep-unary", "DATASET_PATH", "-" * 100_000 + "1"),
    data_var("DATASET_PATH=long-sum", "DATASET_PATH", "1" + "+1" * 30_000),
]  # fmt: skip

# --- rank tables --------------------------------------------------------------------------

RAW = "@raw@"  # replaced by raw JSON text (numbers json.dumps cannot write)
V1: Dict[str, Any] = {
    "status": "completed",
    "version": "1.0",
    "server_count": "1",
    "server_list": [
        {
            "server_id": "192.0.2.41",
            "device": [
                {"device_id": "0", "device_ip": "198.51.100.1", "rank_id": "0"},
                {"device_id": "1", "device_ip": "198.51.100.2", "rank_id": "1"},
            ],
        }
    ],
}
T2: Dict[str, Any] = json.loads(
    (SHARED / "ranktable_template2_2pods_8dev.json").read_text(encoding="utf-8")
)
POD1 = T2["group_list"][0]["instance_list"][1]["pod_name"]  # worker-0, listed second
DEVICE0 = ("server_list", 0, "device", 0)
SERVER0 = ("server_list", 0)
GROUP0 = ("group_list", 0)
POD = ("group_list", 0, "instance_list", 0)


def edit(base: Mapping[str, Any], *changes: Tuple[Tuple[Any, ...], Any], raw: str = "") -> bytes:
    """``base`` with the value at each JSON path replaced; ``raw`` replaces :data:`RAW`."""
    doc: Any = copy.deepcopy(base)
    for path, value in changes:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return json.dumps(doc).replace(f'"{RAW}"', raw).encode()


def v1(*changes: Tuple[Tuple[Any, ...], Any], raw: str = "") -> bytes:
    return edit(V1, *changes, raw=raw)


def t2(*changes: Tuple[Tuple[Any, ...], Any], raw: str = "") -> bytes:
    return edit(T2, *changes, raw=raw)


def validate(case_id: str, table: bytes, culprit: str = "", code: int = 65) -> Case:
    """``ranktable validate`` of a hostile file: the line names the file and the JSON path."""
    return Case(f"validate-{case_id}", VALIDATE, code, ("{table}", culprit), table=table)


def launch_on(case_id: str, table: bytes, culprit: str = "", code: int = 65, **env: str) -> Case:
    """A mindspore dry run on the table (``--wait-timeout 0``): what a launch makes of it."""
    env = {"RANK_TABLE_FILE": "{table}", **env}
    return Case(f"launch-{case_id}", MINDSPORE_ON_TABLE, code, ("{table}", culprit), env=env,
                table=table)  # fmt: skip


def device0(key: str, value: Any, raw: str = "") -> bytes:
    """The template-1 table with ``server_list[0].device[0].<key>`` replaced."""
    return v1(((*DEVICE0, key), value), raw=raw)


def server0(key: str, value: Any) -> bytes:
    return v1(((*SERVER0, key), value))


def top(key: str, value: Any) -> bytes:
    return v1(((key,), value))


def pod0(key: str, value: Any) -> bytes:
    """The template-2 table with ``group_list[0].instance_list[0].<key>`` replaced."""
    return t2(((*POD, key), value))


def group0(key: str, value: Any) -> bytes:
    return t2(((*GROUP0, key), value))


def super_pods(pods: Any, *changes: Tuple[Tuple[Any, ...], Any]) -> bytes:
    """A version 1.2 table with ``super_pod_list`` set to ``pods``."""
    return v1((("version",), "1.2"), (("super_pod_list",), pods), *changes)


ONE_SUPER_POD = [{"super_pod_id": "0", "server_list": [{"server_id": "192.0.2.41"}]}]
SECOND_SERVER = {
    "server_id": "192.0.2.42",
    "device": [{"device_id": "0", "device_ip": "198.51.100.9", "rank_id": "2"}],
}
BAD_DEVICE_IDS = {
    "negative": -1,
    "float": 1.0,
    "bool": True,
    "null": None,
    "object": {"a": 1},
    "list": ["0"],
    "arabic-digit": AR[1],
    "underscore": "1_0",
    "spaced": " 1",
    "5000-digit-string": HUGE,
    "19-digits": 10**19,
    "empty": "",
}
D0 = "server_list[0].device[0]"
P0 = "group_list[0].instance_list[0]"
# One server more devices than one launcher starts (MAX_LOCAL_PROCESSES, 10,000).
TOO_MANY_DEVICES = [
    {"device_id": str(n), "device_ip": f"10.0.{n // 256}.{n % 256}", "rank_id": str(n)}
    for n in range(10_001)
]

TABLE_CASES: List[Case] = [
    *(validate(f"{key}={label}", device0(key, value), f"{D0}.{key}")
      for key in ("device_id", "rank_id") for label, value in BAD_DEVICE_IDS.items()),
    validate("device_id=5000-digit-number", device0("device_id", RAW, raw=HUGE),
             f"{D0}.device_id: an integer of 5000 digits (at most 4300)"),
    validate("device_id=1e400", device0("device_id", RAW, raw="1e400"), f"{D0}.device_id"),
    validate("device_id=NaN", device0("device_id", RAW, raw="NaN"), f"{D0}.device_id"),
    validate("rank_id=gap", device0("rank_id", "5"), f"{D0}.rank_id"),
    validate("rank_id=duplicate", device0("rank_id", "1"), ".rank_id"),
    validate("device_id=duplicate", v1((("server_list", 0, "device", 1, "device_id"), "0")),
             "server_list[0].device[1].device_id"),
    validate("device_ip=duplicate", v1((("server_list", 0, "device", 1, "device_ip"),
             "198.51.100.1")), "server_list[0].device[1].device_ip"),
    validate("device_ip=number", device0("device_ip", 5), f"{D0}.device_ip"),
    validate("server_id=empty", server0("server_id", ""), "server_list[0].server_id"),
    validate("server_id=number", server0("server_id", 5), "server_list[0].server_id"),
    validate("server_id=duplicate", v1((("server_list",), [V1["server_list"][0]] * 2),
             (("server_count",), "2")), "server_list[1].server_id"),
    validate("host_ip=mixed", v1((("server_list",), [{**V1["server_list"][0], "host_ip":
             "192.0.2.1"}, SECOND_SERVER]), (("server_count",), "2")), "server_list[1].host_ip"),
    validate("server_count=mismatch", top("server_count", "2"), "server_count"),
    validate("server_count=5000-digits", top("server_count", HUGE), "server_count"),
    validate("status=initializing", top("status", "initializing"), "status", code=69),
    validate("status=list", top("status", ["completed"]), "status", code=69),
    validate("version=float", top("version", 1.0), "version"),
    validate("version=list", top("version", ["1.0"]), "version"),
    validate("version=object", top("version", {"a": "b"}), "version"),
    validate("version=unknown", top("version", "9.9"), "version"),
    validate("server_list=object", top("server_list", {}), "server_list"),
    validate("server_list=empty", top("server_list", []), "server_list"),
    validate("server_list=number", top("server_list", [5]), "server_list[0]"),
    validate("server_list=nested", top("server_list", [[[]]]), "server_list[0]"),
    validate("global-table", top("server_group_list", []), "server_group_list"),
    validate("device=string", server0("device", "x"), "server_list[0].device"),
    validate("device=null-entry", server0("device", [None]), D0),
    validate("device=10001-entries", server0("device", TOO_MANY_DEVICES),
             "server_list[0].device: lists 10001 devices; at most 10000 on one server"),
    validate("t2-devices=10001-entries", pod0("devices", TOO_MANY_DEVICES),
             f"{P0}.devices: lists 10001 devices; at most 10000 on one server"),
    validate("deep-list", DEEP_LIST.encode(), "nested too deeply"),
    validate("deep-server-list", b'{"status": "completed", "server_list": '
             + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    validate("non-utf8", json.dumps(V1).encode().replace(b"192.0.2.41", b"192.0.2.\xff"), "JSON"),
    validate("binary", b"\xff\xfe\x00garbage", "JSON"),
    validate("truncated", json.dumps(V1).encode()[:40], "JSON"),
    validate("empty", b"", "empty"),
    validate("blank", b"   \n", "empty"),
    validate("null", b"null", "object"),
    validate("array", b"[]", "object"),
    validate("string", b'"completed"', "object"),
    validate("t2-device_count=arabic", group0("device_count", AR[1] + AR[6]),
             "group_list[0].device_count"),
    validate("t2-device_count=float", group0("device_count", 16.0), "group_list[0].device_count"),
    validate("t2-device_count=mismatch", group0("device_count", "15"),
             "group_list[0].device_count"),
    validate("t2-instance_list=string", group0("instance_list", "x"),
             "group_list[0].instance_list"),
    validate("t2-group=null", t2((("group_list",), [None])), "group_list[0]"),
    validate("t2-group_count=5000-digits", t2((("group_count",), HUGE)), "group_count"),
    validate("t2-pod_name=arabic-index", pod0("pod_name", "worker-" + AR[1]), f"{P0}.pod_name"),
    validate("t2-pod_name=same-index", t2(((*POD, "pod_name"), "w-1"),
             (("group_list", 0, "instance_list", 1, "pod_name"), "w-01")), "pod_name"),
    validate("t2-device_id=5000-digits", t2(((*POD, "devices", 0, "device_id"), HUGE)),
             f"{P0}.devices[0].device_id"),
    validate("t2-device_id=duplicate", t2(((*POD, "devices", 1, "device_id"), "0")),
             f"{P0}.devices[1].device_id"),
    validate("v1.2-super_device_id=5000-digits", super_pods(ONE_SUPER_POD,
             ((*DEVICE0, "super_device_id"), HUGE)), f"{D0}.super_device_id"),
    validate("v1.2-super_pod_id=float", super_pods([{**ONE_SUPER_POD[0], "super_pod_id": 1.5}]),
             "super_pod_list[0].super_pod_id"),
    validate("v1.2-super_pod_list=string", super_pods("x"), "super_pod_list"),
    # What a launch makes of the same files: bad values 65 (an integer too long to convert is
    # one, not unreadable JSON), unreadable JSON "not ready" 69.
    launch_on("device_id=5000-digit-string", device0("device_id", HUGE), f"{D0}.device_id"),
    launch_on("device=10001-entries", server0("device", TOO_MANY_DEVICES),
              "server_list[0].device: lists 10001 devices; at most 10000 on one server"),
    launch_on("t2-devices=10001-entries", pod0("devices", TOO_MANY_DEVICES),
              f"{P0}.devices: lists 10001 devices; at most 10000 on one server"),
    launch_on("device_id=5000-digit-number", device0("device_id", RAW, raw=HUGE),
              f"{D0}.device_id: an integer of 5000 digits (at most 4300)"),
    launch_on("deep-list", DEEP_LIST.encode(), "nested too deeply", code=69),
    launch_on("truncated", json.dumps(V1).encode()[:40], "JSON", code=69),
    launch_on("server_id=shell", server0("server_id", "$(id)"), "$(id)"),
    launch_on("server_id=space", server0("server_id", "a b"), "a b"),
    launch_on("server_id=control", server0("server_id", "a\u0001b"), "server_list[0].server_id"),
    launch_on("rank_id=gap", device0("rank_id", "5"), "rank_id"),
    launch_on("t2-unknown-pod", t2(), "MA_CURRENT_INSTANCE_NAME",
              MA_CURRENT_INSTANCE_NAME="worker-7"),
    # validate accepts server ids a launch refuses as host names.
    validate("server_id=shell", server0("server_id", "$(id)"), "server_list[0].server_id"),
    validate("server_id=space", server0("server_id", "a b"), "server_list[0].server_id"),
    validate("server_id=control", server0("server_id", "a\u0001b"), "server_list[0].server_id"),
    # device_ip is never checked as an address (HCCL refuses it at start-up).
    validate("device_ip=shell", device0("device_ip", "$(id)"), f"{D0}.device_ip"),
    launch_on("device_ip=shell", device0("device_ip", "$(id)"), f"{D0}.device_ip"),
    # Template 2: int() of a pod index past 4,300 digits, exit 70.
    validate("t2-pod_name=5000-digit-index", pod0("pod_name", "worker-" + HUGE),
             f"{P0}.pod_name"),
    launch_on("t2-pod_name=5000-digit-index", pod0("pod_name", "worker-" + HUGE),
              f"{P0}.pod_name", MA_CURRENT_INSTANCE_NAME=POD1),
    # Template 2: a bad server_id is found only in the converted file (already written), and
    # the line names that file and "server 1", not the input and its JSON path.
    validate("t2-server_id=shell", pod0("server_id", "$(id)"), f"{P0}.server_id"),
    launch_on("t2-server_id=shell", pod0("server_id", "$(id)"), f"{P0}.server_id",
              MA_CURRENT_INSTANCE_NAME=POD1),
]  # fmt: skip

ALL_CASES = [*CLI_CASES, *ENV_CASES, *JSON_CASES, *TABLE_CASES]


def test_at_least_150_distinct_cases() -> None:
    ids = [case.id for case in ALL_CASES]
    assert len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)
    assert len(ids) >= 150


def check(case: Case, tmp_path: Path) -> None:
    result = run_case(case, tmp_path)
    culprit = [expand(name, tmp_path) for name in case.culprit]
    assert_refused(result, case.code, culprit, case.says)


@pytest.mark.parametrize("case", [case.param() for case in CLI_CASES])
def test_cli_value(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)


@pytest.mark.parametrize("case", [case.param() for case in ENV_CASES])
def test_environment_variable(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)


@pytest.mark.parametrize("case", [case.param() for case in JSON_CASES])
def test_json_variable(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)


@pytest.mark.parametrize("case", [case.param() for case in TABLE_CASES])
def test_rank_table(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)


# --- the base environments are valid: each refusal above is the hostile value's doing ------

SIMULATE = ("simulate", "--nodes", "2", "--platform", "modelarts", "--framework", "torch_ddp",
            "--print-env", *HARMLESS)  # fmt: skip
ON_V1 = {"TABLE": json.dumps(V1), "RANK_TABLE_FILE": "{table}"}
ON_T2 = {"TABLE": json.dumps(T2), "RANK_TABLE_FILE": "{table}", "MA_CURRENT_INSTANCE_NAME": POD1}


@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param((*DRY, *COMMAND), {}, id="local-dry-run"),
        pytest.param((*RUN, *HARMLESS), {}, id="local-run"),
        *(pytest.param((*TOPOLOGY, name), base, id=name) for name, base in BASES.items()),
        pytest.param((*TOPOLOGY, "tf-config"), {"TF_CONFIG": json.dumps(cluster(["w0:1"]))},
                     id="tf-config"),
        pytest.param(VALIDATE, {"TABLE": json.dumps(V1)}, id="validate-v1"),
        pytest.param(VALIDATE, {"TABLE": json.dumps(T2)}, id="validate-t2"),
        pytest.param(MINDSPORE_ON_TABLE, ON_V1, id="launch-v1"),
        pytest.param(MINDSPORE_ON_TABLE, ON_T2, id="launch-t2"),
        pytest.param(SIMULATE, {}, id="simulate-print-env"),
    ],
)  # fmt: skip
def test_base_environment_is_valid(
    args: Tuple[str, ...], env: Dict[str, str], tmp_path: Path
) -> None:
    env = dict(env)
    table = env.pop("TABLE", None)
    case = Case("base", args, 0, (), env=env, table=table.encode() if table else None)
    result = run_case(case, tmp_path)
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert ERROR not in result.stderr


# --- job ids and role names never put a file outside the log or launch directory ----------

ESCAPE = "../../../../escape/x"


def plan_paths(plan: Mapping[str, Any]) -> List[str]:
    """Every path of a dry-run plan: working directories, log files, created directories,
    the Ascend log path, the rank table the processes get."""
    paths: List[str] = []
    for process in plan["processes"]:
        paths += [process["cwd"], process["log_file"], *process["dirs"]]
        if "ASCEND_PROCESS_LOG_PATH" in process["env"]:
            paths.append(process["env"]["ASCEND_PROCESS_LOG_PATH"])
    table = plan["topology"].get("rank_table_file")
    return [*paths, table] if table else paths


def inside(path: str, roots: Sequence[Path]) -> bool:
    normal = os.path.normpath(path)
    return any(os.path.commonpath([normal, str(root)]) == str(root) for root in roots)


def t2_in_dir(tmp: Path) -> Dict[str, str]:
    (tmp / "config").mkdir()
    (tmp / "config" / "jobstart_hccl.json").write_text(json.dumps(T2), encoding="utf-8")
    return {"RANK_TABLE_FILE": str(tmp / "config"), "MA_CURRENT_INSTANCE_NAME": POD1}


def tf_role(tmp: Path) -> Dict[str, str]:
    del tmp
    doc = {
        "cluster": {"worker": ["w0:2222"], "ps": ["p0:2222"], ESCAPE: ["e0:2222"]},
        "task": {"type": ESCAPE, "index": 0},
    }
    return {"TF_CONFIG": json.dumps(doc)}


@pytest.mark.parametrize(
    ("framework", "source_name", "platform", "hostile"),
    [
        pytest.param("mindspore", "ranktable", t2_in_dir, {"MA_VJ_NAME": ESCAPE},
                     id="mindspore-MA_VJ_NAME"),
        pytest.param("mindspore", "ranktable", t2_in_dir, {"MA_VJ_NAME": f"ma-job/{ESCAPE}"},
                     id="mindspore-MA_VJ_NAME-prefixed"),
        pytest.param("mindspore", "ranktable", t2_in_dir, {"MA_VJ_NAME": ".."},
                     id="mindspore-MA_VJ_NAME-dotdot"),
        pytest.param("mindspore", "ranktable", t2_in_dir, {"JOB_ID": ESCAPE},
                     id="mindspore-JOB_ID"),
        pytest.param("mindspore", "ranktable", t2_in_dir, {"BATCH_JOB_ID": ESCAPE},
                     id="mindspore-BATCH_JOB_ID"),
        pytest.param("torch_ddp", "ranktable", t2_in_dir, {"MA_VJ_NAME": ESCAPE},
                     id="torch_ddp-MA_VJ_NAME"),
        # A TF_CONFIG role name becomes part of the tensorflow_ps log file name as it is.
        pytest.param("tensorflow_ps", "tf-config", tf_role, {}, id="tensorflow_ps-TF_CONFIG-role"),
    ],
)  # fmt: skip
def test_paths_stay_inside_log_and_launch_dirs(
    tmp_path: Path,
    framework: str,
    source_name: str,
    platform: Callable[[Path], Dict[str, str]],
    hostile: Dict[str, str],
) -> None:
    """No platform-given name (job id, role) puts a path of the plan outside --log-dir and the
    launch directory (MA_VJ_NAME='../../../../escape/x' and friends)."""
    launch_dir, log_dir = tmp_path / "work", tmp_path / "logs"  # siblings: no shared parent
    launch_dir.mkdir()
    env = clean_env({**platform(tmp_path), **hostile})
    args = ["--framework", framework, "--topology", source_name, "--log-dir", str(log_dir),
            "--wait-timeout", "0", "--dry-run", *COMMAND]  # fmt: skip
    result = run_cli(args, env=env, cwd=launch_dir, timeout=TIMEOUT)
    assert result.code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["processes"]
    outside = [p for p in plan_paths(plan) if not inside(p, (log_dir, launch_dir))]
    assert outside == []


# Bytes that are not UTF-8 (argv and environment hold bytes; Python sees surrogates): the dry
# run prints the plan with JSON escapes, as `topology --json` does, or refuses naming the
# culprit; never a serialiser crash.
@pytest.mark.parametrize(
    ("args", "env", "culprit"),
    [
        pytest.param((*DRY, "--env", "A=\udcff", *COMMAND), {}, "--env", id="--env-value"),
        pytest.param((*DRY, "--", "python", "\udcff.py"), {}, "command", id="command-argument"),
        pytest.param(
            (*DRY, "--log-dir", "{tmp}/\udcff", *COMMAND), {}, "--log-dir", id="--log-dir"
        ),
        pytest.param((*DRY, *COMMAND), {"MA_VJ_NAME": "job\udcff"}, "MA_VJ_NAME", id="MA_VJ_NAME"),
    ],
)
def test_non_utf8_bytes(
    args: Tuple[str, ...], env: Dict[str, str], culprit: str, tmp_path: Path
) -> None:
    result = run_case(Case("non-utf8", args, 0, (), env=env), tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.code in (0, 64, 65), result.stderr
    if result.code == 0:
        assert json.loads(result.stdout)["processes"]
    else:
        assert_refused(result, result.code, [culprit])
