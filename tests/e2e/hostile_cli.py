"""The generated hostile-input suite's model of the command line (issue 18, point 10).

Every command's parameters are read from the click command objects themselves (the launch
command with every installed framework's options, ``simulate``, ``render`` and the tool
commands), so an option added tomorrow is covered without a line here. Each option is a
target twice: on the command line and as its ``MALAUNCH_*`` twin; each argument once.

A case puts one hostile value into one target of a command line that is otherwise valid and
harmless (a dry run, ``--print-env``, files in the case's own directory), and
:func:`check` holds the launcher to SPEC §3: no exit 70 (nor 1), no traceback, at most one
``malaunch: error:`` line, which names the option or the variable when the value is refused,
an end within the time limit, and an empty value refused where it means nothing.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Mapping, Sequence, Set, Tuple

import click
import yaml
from hypothesis import strategies as st

from malaunch.cli import render, simulate, tools
from malaunch.cli.launch import build_launch_command
from malaunch.log import escape_controls
from malaunch.plugins import load_plugins
from malaunch.render import emit

ERROR = "malaunch: error: "
TWIN_PREFIX = "MALAUNCH"

# --- the targets ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Target:
    """One place a value can go: ``--flag VALUE``, its variable, or a positional argument."""

    command: str  # "launch", "simulate", "ranktable validate", ...
    name: str  # the click parameter's name
    kind: str  # "option", "twin" or "argument"
    flags: Tuple[str, ...]  # every spelling (-f, --follow); () for an argument
    envvar: str  # the twin's variable ("" for an argument)
    metavar: str  # what click calls an argument in its messages (PATH, TARGET)
    is_flag: bool
    framework: str  # the framework plugin the option belongs to ("" for the core's)
    is_path: bool = False  # a file's errors may name the file instead (SPEC §3)

    @property
    def id(self) -> str:
        where = self.envvar if self.kind == "twin" else (self.flags or (self.metavar,))[0]
        return f"{self.command}:{where}"

    @property
    def culprits(self) -> Tuple[str, ...]:
        """What the error line must name: the variable, or one spelling of the option."""
        if self.kind == "twin":
            return (self.envvar,)
        if self.kind == "argument":
            return (self.metavar, self.name)
        return self.flags


def documented_twin(target: Target, prefix: str) -> str:
    """The variable the docs promise: ``<prefix>_<OPTION>``, the long option upper-cased."""
    longest = max(target.flags, key=len)
    return f"{prefix}_{longest.lstrip('-').upper().replace('-', '_')}"


def commands(environ: Mapping[str, str]) -> Dict[str, Tuple[click.Command, str]]:
    """Every command line malaunch parses, with the prefix of its variables."""
    found: Dict[str, Tuple[click.Command, str]] = {
        "launch": (build_launch_command(load_plugins(environ)), TWIN_PREFIX),
        "simulate": (simulate.build_command(environ), TWIN_PREFIX),
        "render": (render.build_command(environ), TWIN_PREFIX),
    }

    def walk(group: click.Group, path: Tuple[str, ...]) -> None:
        for name, command in group.commands.items():
            if name in found:  # simulate and render: their real parsers are above
                continue
            words = (*path, name)
            if isinstance(command, click.Group):
                walk(command, words)
            else:
                # click adds each command's name to auto_envvar_prefix.
                prefix = "_".join([TWIN_PREFIX, *(w.upper().replace("-", "_") for w in words)])
                found[" ".join(words)] = (command, prefix)

    walk(tools.tools, ())
    return found


def _owners(environ: Mapping[str, str]) -> Dict[str, str]:
    """Option name -> the framework plugin that adds it."""
    plugins = load_plugins(environ)
    return {
        opt.name: name
        for name, registered in plugins.frameworks.items()
        for opt in registered.item.options
        if opt.name
    }


def targets(environ: Mapping[str, str]) -> List[Target]:
    owners = _owners(environ)
    result: List[Target] = []
    for label, (command, prefix) in commands(environ).items():
        for param in command.params:
            if param.name in (None, "help"):
                continue
            name = str(param.name)
            framework = owners.get(name, "") if label in ("launch", "simulate", "render") else ""
            path = isinstance(param.type, click.Path)
            if isinstance(param, click.Argument):
                metavar = (param.metavar or name).upper().strip(".[]")
                result.append(
                    Target(label, name, "argument", (), "", metavar, False, framework, path)
                )
                continue
            assert isinstance(param, click.Option)
            flags = tuple(param.opts)
            envvar = param.envvar if isinstance(param.envvar, str) else f"{prefix}_{name.upper()}"
            flag = bool(param.is_flag)
            for kind in ("option", "twin"):
                result.append(Target(label, name, kind, flags, envvar, "", flag, framework, path))
    # A flag takes no value on the command line: only its variable can carry one.
    return [t for t in result if not (t.kind == "option" and t.is_flag)]


# --- the command lines around a value --------------------------------------------------------

VALUE = "{value}"  # where an argument's value goes in a base command line


def base(target: Target, files: Mapping[str, str]) -> List[str]:
    """A valid, harmless command line for ``target``'s command, files from ``files``."""
    framework = target.framework or "torch_ddp"
    # tensorflow_ps on one machine needs its cluster's shape (the local source has no roles).
    shape = ["--num-ps", "1", "--num-workers", "1"] if framework == "tensorflow_ps" else []
    platform = "tf-ps" if framework == "tensorflow_ps" else "octopus"
    table, logs, tmp = files["table"], files["logs"], files["tmp"]
    lines: Dict[str, List[str]] = {
        "launch": ["--framework", framework, *shape, "--topology", "local",
                   "--log-dir", f"{tmp}/logs", "--dry-run", "--", "true"],
        "simulate": ["simulate", "--nodes", "1", "--platform", platform, "--framework",
                     framework, "--log-dir", f"{tmp}/logs", "--print-env", "--", "true"],
        "render": ["render", "volcano", "--nodes", "1", "--framework", framework, "--image",
                   "registry.example/train:1", "--", "python", "train.py"],
        "plugins": ["plugins"],
        "topology": ["topology", "--json"],
        "ranktable validate": ["ranktable", "validate", table],
        "ranktable convert": ["ranktable", "convert", table, f"{tmp}/converted.json"],
        "ranktable generate": ["ranktable", "generate", f"{tmp}/generated.json",
                               "--hccn-conf", files["hccn"], "--server-id", "10.0.0.1"],
        "logs": ["logs", logs],
        "report": ["report", logs, "--html", f"{tmp}/report.html"],
    }  # fmt: skip
    return list(lines[target.command])


def command_line(
    target: Target, value: str, files: Mapping[str, str], command: click.Command
) -> Tuple[List[str], Dict[str, str]]:
    """The arguments and extra environment that put ``value`` into ``target``."""
    args = base(target, files)
    param = next(p for p in command.params if p.name == target.name)
    if target.kind == "argument":
        return _with_argument(args, command, param, value), {}
    args = _without_option(args, param)
    if target.kind == "twin":
        return args, {target.envvar: value}
    # Before the first positional word after the command's own words.
    at = args.index("--") if "--" in args else len(args)
    return [*args[:at], target.flags[-1], value, *args[at:]], {}


def _without_option(args: List[str], param: click.Parameter) -> List[str]:
    """``args`` without the base's own use of ``param`` (the target replaces it)."""
    assert isinstance(param, click.Option)
    spellings = set(param.opts) | set(param.secondary_opts)
    out: List[str] = []
    skip = False
    for index, word in enumerate(args):
        if skip:
            skip = False
            continue
        if "--" in args and index >= args.index("--"):
            out.append(word)
        elif word in spellings:
            skip = not param.is_flag
        else:
            out.append(word)
    return out


def _with_argument(
    args: List[str], command: click.Command, param: click.Parameter, value: str
) -> List[str]:
    """``args`` with ``param``'s positional value replaced by ``value``."""
    if param.name == "command":  # the job's command, after --
        return [*args[: args.index("--") + 1], value]
    positions = _positions(args, command)
    arguments = [p.name for p in command.params if isinstance(p, click.Argument)]
    number = arguments.index(param.name)
    if number >= len(positions):
        return [*args, value]
    index = positions[number]
    return [*args[:index], value, *args[index + 1 :]]


def _positions(args: Sequence[str], command: click.Command) -> List[int]:
    """Indices of the positional words in ``args`` (after the command's own words)."""
    takes_value = {
        opt
        for p in command.params
        if isinstance(p, click.Option) and not p.is_flag
        for opt in p.opts
    }
    positions: List[int] = []
    skip = False
    words = {"ranktable", "validate", "convert", "generate", "logs", "report", "render"}
    for index, word in enumerate(args):
        if skip:
            skip = False
        elif word == "--":
            break
        elif word in takes_value:
            skip = True
        elif not word.startswith("-") and not (index <= 1 and word in words):
            positions.append(index)
    return positions


# --- the values ------------------------------------------------------------------------------

# Digits of other scripts, which str.isdigit() and int() take: Arabic-Indic, fullwidth, ...
OTHER_DIGITS = st.characters(whitelist_categories=["Nd"], blacklist_characters="0123456789")
CONTROLS = st.characters(whitelist_categories=["Cc"], blacklist_characters="\x00")
SPACES = st.sampled_from(" \t\n\r\x0b\x0c\u00a0\u2003\u3000\u2028")
PATHS = (
    "{tmp}/file", "{tmp}/file/below", "{tmp}/fifo", "{tmp}/fifo/below", "/dev/null",
    "{tmp}/dir", "{tmp}/dir/", "{tmp}/missing", "{tmp}/missing/below", "{tmp}/unreadable",
    "{tmp}", "/", ".", "..", "{tmp}/link-loop",
)  # fmt: skip
WRONG_TYPES = (
    "1.5", "1e3", "1e400", "nan", "-inf", "true", "yes", "none", "null", "[1, 2]", "{}",
    "0x10", "0o7", "1_000", "+1", "1,2", "1-", "-", "--", "--help", "-x", "=", "a=b", "*",
    "$(id)", "`id`", "a;b", "a b", "%s", "{0}", "{rank:d}", "{", "(a+)+$", "SIGKILL", "9:9",
    "any", "all", "none,all", "\\", "'", '"', "~", "\u00e9", "\U0001f600", "\u202e1",
)  # fmt: skip
# Bytes that are not UTF-8 reach Python's argv and environment as lone surrogates.
UNDECODABLE = (os.fsdecode(b"\xff"), os.fsdecode(b"1\xfe"), os.fsdecode(b"a\xc3"))


def _huge() -> st.SearchStrategy[str]:
    unit = st.sampled_from(["9", "a", "1,", "x/", "{rank}", "\u0661", "0-1,", "A=1 "])
    return st.tuples(unit, st.integers(4500, 5500)).map(lambda pair: pair[0] * pair[1])


def _classes() -> List[st.SearchStrategy[str]]:
    """One strategy per class of hostile value (issue 18: empty, whitespace, huge, negative,
    other scripts' digits, control characters, special files, wrong types)."""
    number = st.integers(0, 10**6).map(str)
    return [
        st.just(""),
        st.text(SPACES, min_size=1, max_size=4),
        _huge(),
        st.one_of(st.integers(max_value=-1).map(str), st.sampled_from(["-0", "-1.5", "-1e9"])),
        st.text(OTHER_DIGITS, min_size=1, max_size=6),
        st.tuples(number, st.text(CONTROLS, min_size=1, max_size=3), st.booleans()).map(
            lambda t: t[1] + t[0] if t[2] else t[0] + t[1]
        ),
        st.sampled_from(PATHS),
        st.sampled_from(WRONG_TYPES),
        st.sampled_from(UNDECODABLE),
        st.tuples(number, SPACES).map(lambda t: f"{t[1]}{t[0]}{t[1]}"),  # a number padded
        st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                min_size=1, max_size=12),
    ]  # fmt: skip


CLASSES = _classes()


def values(offset: int) -> st.SearchStrategy[str]:
    """Hostile values, the classes taken in an order that starts at ``offset``: with a
    derandomized run each target meets the classes in its own order, not all the first."""
    count = len(CLASSES)
    return st.integers(0, count - 1).flatmap(lambda i: CLASSES[(i + offset) % count])


def expand(value: str, files: Mapping[str, str]) -> str:
    return value.replace("{tmp}", files["tmp"])


# --- the verdict -----------------------------------------------------------------------------

# Options whose empty value means something (documented in their --help); elsewhere an empty
# value on the command line is refused (64). An empty MALAUNCH_* variable counts as unset.
EMPTY_MEANS = {
    "console_prefix": "no prefix",
    "job_secret": "no secret (the default)",
    "echo_greeting": "the example plugin's free text",
    "command": "the job's own argument",
}


# Plugin names: an unknown one is "plugin missing" (78).
PLUGIN_NAMES = {"framework", "topology", "source"}
# Names of inputs that must exist: `logs --run NAME` and `report --run NAME` pick a run folder
# of the log dir, and one that is not there is a missing input (66), as a missing file is.
INPUT_NAMES = {"run_name"}


def expected_codes(target: Target) -> Set[int]:
    """A value refused where click parses it is 64; a file's content or absence may be 65 or
    66 (74: an output that cannot be written), an unknown plugin 78."""
    if target.is_path or target.name == "command":
        return {64, 65, 66, 71, 74}
    if target.name in PLUGIN_NAMES:
        return {64, 78}
    if target.name in INPUT_NAMES:
        return {64, 66}
    return {64}


# The check turns itself on with issue 18's point 5 (render's YAML written by PyYAML, another
# change under way): until then the hand-made writer fails it on any character past the BMP.
RENDER_USES_PYYAML = hasattr(emit, "yaml")


def check_yaml(target: Target, result: Mapping[str, Any], shown: str) -> None:
    """render's manifests load with libyaml, as kubectl's Go reader would (issue 18: an emoji
    was written as a JSON surrogate pair both refuse)."""
    if target.command != "render" or result["code"] != 0 or not RENDER_USES_PYYAML:
        return
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        list(yaml.load_all(result["stdout"], Loader=loader))
    except yaml.YAMLError as exc:
        raise AssertionError(f"render's YAML does not load: {exc}\n{shown}") from None


def check(target: Target, value: str, result: Mapping[str, Any]) -> None:
    """SPEC §3 for one case; the assertion message shows the case."""
    code, out, err = result["code"], result["stdout"], result["stderr"]
    shown = f"{target.id}={value[:80]!r}: exit {code}\nstderr: {err[-1500:]}\nstdout: {out[:300]}"
    assert not result["timed_out"], f"no end within the time limit\n{shown}"
    assert "Traceback (most recent call last)" not in out + err, shown
    assert code not in (1, 70), shown
    errors = [line for line in err.splitlines() if line.startswith(ERROR)]
    assert len(errors) <= 1, shown
    empty_refused = value == "" and target.kind == "option" and target.name not in EMPTY_MEANS
    if empty_refused:
        assert code == 64, f"an empty value that means nothing must be refused\n{shown}"
    if code != 0:
        assert code in expected_codes(target), shown
        assert len(errors) == 1, shown
        culprits = target.culprits
        if target.is_path and value:
            # The file at fault, as a launcher line shows it (controls escaped).
            culprits += (value[:60], escape_controls(value)[:60])
        names = [name for name in culprits if name and name in errors[0]]
        # An empty variable is unset: the error is the default's (a required option missing,
        # the default file absent), not the variable's.
        unset = target.kind == "twin" and value == ""
        named = names or unset or target.kind == "argument"
        assert named, f"the error names no {culprits}\n{shown}"
    check_yaml(target, result, shown)
