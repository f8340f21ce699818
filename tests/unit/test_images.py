"""Static checks of examples/images: the Dockerfiles follow the platform rules and every start
command (Dockerfile CMD, start-commands.md) is a valid malaunch command line.

There is no Docker engine here, so the Dockerfiles are parsed by a small reader that knows
Docker's line continuations, comments, ``ENV``/``ARG`` substitution and exec-form ``CMD``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shlex
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

import click
import pytest

from malaunch.cli.launch import build_launch_command
from malaunch.plugins import load_plugins
from malaunch.testing import run_cli

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "examples" / "images"
DOCKERFILES = sorted(IMAGES.glob("*.Dockerfile"))
INSTRUCTIONS = {
    "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
    "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
}  # fmt: skip
# What a base image's environment provides to ${...} references (Docker's default PATH).
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclasses.dataclass(frozen=True)
class Instruction:
    name: str
    args: str
    line: int


def parse_dockerfile(text: str) -> List[Instruction]:
    """Logical instructions: ``\\`` continues a line; comment lines are dropped, also inside
    a continuation (as Docker does)."""
    result: List[Instruction] = []
    pending: List[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if not pending:
            start = number
        continued = stripped.endswith("\\")
        pending.append(stripped[:-1] if continued else stripped)
        if not continued:
            joined = " ".join(part.strip() for part in pending if part.strip())
            name, _, args = joined.partition(" ")
            result.append(Instruction(name.upper(), args.strip(), start))
            pending = []
    assert not pending, "the file ends inside a line continuation"
    return result


def expand(value: str, variables: Dict[str, str], where: str) -> str:
    def substitute(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in variables, f"{where}: ${{{name}}} is not defined by an earlier ARG/ENV"
        return variables[name]

    return VARIABLE.sub(substitute, value)


def image_env(instructions: Sequence[Instruction]) -> Dict[str, str]:
    """The final ENV of the image, with ARG defaults and earlier values substituted."""
    variables = dict(BASE_ENV)
    env: Dict[str, str] = {}
    for ins in instructions:
        if ins.name not in ("ARG", "ENV"):
            continue
        for item in shlex.split(ins.args):
            key, sep, value = item.partition("=")
            assert sep or ins.name == "ARG", f"line {ins.line}: use the ENV KEY=VALUE form"
            value = expand(value, variables, f"line {ins.line}")
            variables[key] = value
            if ins.name == "ENV":
                env[key] = value
    return env


def last(instructions: Sequence[Instruction], name: str) -> Instruction:
    found = [ins for ins in instructions if ins.name == name]
    assert found, f"no {name} instruction"
    return found[-1]


def run_commands(instructions: Sequence[Instruction]) -> List[List[str]]:
    """Each simple command of every RUN (split at ``&&``, ``||``, ``;``, ``|``; leading
    ``if``/``then``/``else`` keywords dropped)."""
    commands: List[List[str]] = []
    for ins in instructions:
        if ins.name != "RUN":
            continue
        current: List[str] = []
        lexer = shlex.shlex(ins.args, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        for token in lexer:
            if token in ("&&", "||", ";", "|"):
                commands.append(current)
                current = []
            else:
                current.append(token)
        commands.append(current)
    keywords = ("if", "then", "else", "elif", "do", "!")
    simple = []
    for command in commands:
        start = 0
        while start < len(command) and command[start] in keywords:
            start += 1
        if command[start:]:
            simple.append(command[start:])
    return simple


@pytest.fixture(scope="module")
def help_options() -> Set[str]:
    """Every ``--option`` the installed ``malaunch --help`` lists."""
    result = run_cli(["--help"])
    assert result.code == 0, result.stderr
    options = options_in_help(result.stdout)
    assert {"--framework", "--conda-env", "--dry-run"} <= options
    return options


def options_in_help(text: str) -> Set[str]:
    """The option strings of click's help: the first column of each option line."""
    options: Set[str] = set()
    for line in text.splitlines():
        if re.match(r"\s{2}(-\w, )?--", line):
            first_column = re.split(r"\s{2,}", line.strip())[0]
            options.update(re.findall(r"--[a-z][\w-]*", first_column))
    return options


@functools.cache
def launch_command() -> click.Command:
    return build_launch_command(load_plugins({}))


@functools.cache
def framework_owners() -> Dict[str, str]:
    """Option string -> the framework that contributes it."""
    plugins = load_plugins({})
    return {
        opt: name
        for name, registered in plugins.frameworks.items()
        for option in registered.item.options
        for opt in (*option.opts, *option.secondary_opts)
    }


def check_launch_args(args: Sequence[str], help_options: Set[str], where: str) -> None:
    """``args`` (after ``malaunch``) is a launch: known options, framework-owned options of the
    chosen framework only, a ``--`` then a command, and click accepts the values."""
    assert "--" in args, f"{where}: no `--` before the training command"
    head, command = list(args[: args.index("--")]), list(args[args.index("--") + 1 :])
    assert command, f"{where}: no training command after `--`"
    options = [arg.split("=", 1)[0] for arg in head if arg.startswith("--")]
    unknown = [opt for opt in options if opt not in help_options]
    assert not unknown, f"{where}: not options of `malaunch --help`: {unknown}"
    assert "--framework" in head, f"{where}: no --framework"
    framework = head[head.index("--framework") + 1]
    owners = framework_owners()
    assert framework in set(owners.values()), f"{where}: unknown framework {framework}"
    foreign = [opt for opt in options if owners.get(opt, framework) != framework]
    assert not foreign, f"{where}: options of another framework than {framework}: {foreign}"
    # Parsing only (the callback does not run): option values must have the right type.
    context = launch_command().make_context("malaunch", list(args))
    assert context.params["framework"] == framework
    assert list(context.params["command"]) == command


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_parses_and_follows_the_platform_rules(path: Path) -> None:
    instructions = parse_dockerfile(path.read_text(encoding="utf-8"))
    names = [ins.name for ins in instructions]
    assert set(names) <= INSTRUCTIONS, f"unknown instructions {set(names) - INSTRUCTIONS}"
    # Docker allows only ARG before the first FROM.
    first_from = names.index("FROM")
    assert set(names[:first_from]) <= {"ARG"}
    assert names.count("FROM") == 1
    assert last(instructions, "USER").args == "ma-user"
    assert last(instructions, "WORKDIR").args == "/home/ma-user"
    env = image_env(instructions)
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["ANACONDA_DIR"].startswith("/home/ma-user/")
    assert env["DEFAULT_CONDA_ENV_NAME"]
    conda_bin = f"{env['ANACONDA_DIR']}/envs/{env['DEFAULT_CONDA_ENV_NAME']}/bin"
    assert env["PATH"].split(":")[0] == conda_bin, "the conda env's bin must come first"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_creates_ma_user_1000_in_group_100(path: Path) -> None:
    commands = run_commands(parse_dockerfile(path.read_text(encoding="utf-8")))
    (useradd,) = [c for c in commands if c[0] == "useradd"]
    flags = dict(zip(useradd[1:-1:], useradd[2::]))
    assert (flags["-u"], flags["-g"], flags["-d"]) == ("1000", "100", "/home/ma-user")
    assert "-m" in useradd and useradd[-1] == "ma-user"
    group = [c for c in commands if c[0] in ("groupadd", "groupmod")]
    assert ["groupadd", "-g", "100", "ma-group"] in group
    assert any(c[:3] == ["groupmod", "-n", "ma-group"] for c in group)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_installs_malaunch_into_the_env_and_copies_existing_files(path: Path) -> None:
    instructions = parse_dockerfile(path.read_text(encoding="utf-8"))
    commands = run_commands(instructions)
    installs = [c for c in commands if c[:2] == ["pip", "install"]]
    assert any("malaunch-" in arg for c in installs for arg in c), "malaunch is not pip-installed"
    for ins in instructions:
        if ins.name in ("COPY", "ADD"):
            parts = shlex.split(ins.args)
            assert "--chown=ma-user:ma-group" in parts, f"line {ins.line}: files owned by root"
            sources = [p for p in parts[:-1] if not p.startswith("--")]
            for source in sources:
                # dist/ holds the wheel built just before `docker build`.
                assert source == "dist/" or (REPO / source).exists(), f"line {ins.line}: {source}"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_start_command_is_a_malaunch_launch(path: Path, help_options: Set[str]) -> None:
    instructions = parse_dockerfile(path.read_text(encoding="utf-8"))
    argv: List[str] = []
    for name in ("ENTRYPOINT", "CMD"):
        found = [ins for ins in instructions if ins.name == name]
        if found:
            exec_form = json.loads(found[-1].args)  # shell form would put sh -c in front
            assert isinstance(exec_form, list) and all(isinstance(a, str) for a in exec_form)
            argv.extend(exec_form)
    assert argv and argv[0] == "malaunch", f"start command {argv}"
    check_launch_args(argv[1:], help_options, path.name)


def start_commands(markdown: str) -> List[Tuple[str, List[str]]]:
    """(where, argv after ``malaunch``) of every malaunch command in the sh and yaml blocks."""
    found: List[Tuple[str, List[str]]] = []
    blocks = re.findall(r"```(sh|yaml)\n(.*?)```", markdown, flags=re.S)
    for kind, body in blocks:
        for line in body.replace("\\\n", " ").splitlines():
            argv: Optional[List[str]] = None
            if kind == "sh" and line.strip():
                argv = shlex.split(line, comments=True)
            match = re.match(r"\s*(command|args):\s*(\[.*\])\s*$", line)
            if kind == "yaml" and match:
                argv = json.loads(match.group(2))
            if argv and "malaunch" in argv:
                found.append((line.strip(), argv[argv.index("malaunch") + 1 :]))
    return found


def test_start_commands_doc_names_only_real_options(help_options: Set[str]) -> None:
    commands = start_commands((IMAGES / "start-commands.md").read_text(encoding="utf-8"))
    frameworks = {args[args.index("--framework") + 1] for _, args in commands}
    assert frameworks == {"mindspore", "tensorflow_ps", "torch_ddp"}
    assert len(commands) >= 10
    for where, args in commands:
        check_launch_args(args, help_options, where)


GROUPS = ("ranktable",)  # commands whose first argument names a subcommand


def tool_options(path: Sequence[str]) -> Set[str]:
    """The ``--options`` of ``malaunch <tool> [<subcommand>] --help``."""
    result = run_cli([*path, "--help"])
    assert result.code == 0, result.stderr
    return options_in_help(result.stdout)


def test_platform_doc_commands_are_real(help_options: Set[str]) -> None:
    """docs/platforms.md: every launch command and every ``malaunch <tool>`` line."""
    commands = start_commands((REPO / "docs" / "platforms.md").read_text(encoding="utf-8"))
    launches = [(where, args) for where, args in commands if args[0].startswith("--")]
    frameworks = {args[args.index("--framework") + 1] for _, args in launches}
    assert frameworks == {"mindspore", "tensorflow_ps", "torch_ddp"}
    for where, args in launches:
        check_launch_args(args, help_options, where)
    tools = [(where, args) for where, args in commands if not args[0].startswith("--")]
    assert tools, "the debugging section shows `malaunch topology`"
    for where, args in tools:
        depth = 2 if args[0] in GROUPS else 1
        known = tool_options(args[:depth])
        head = args[depth : args.index("--")] if "--" in args else args[depth:]
        unknown = [a for a in head if a.startswith("--") and a not in known]
        command = " ".join(args[:depth])
        assert not unknown, f"{where}: not options of `malaunch {command}`: {unknown}"


def test_the_checker_rejects_what_it_should(help_options: Set[str]) -> None:
    """The checks above can fail: a misspelt option, a foreign framework option, no ``--``."""
    bad = [
        ["--framework", "torch_ddp", "--nproc-per-nodes", "2", "--", "python", "t.py"],
        ["--framework", "torch_ddp", "--num-ps", "1", "--", "python", "t.py"],
        ["--framework", "torch_ddp", "python", "t.py"],
    ]
    for args in bad:
        with pytest.raises(AssertionError):
            check_launch_args(args, help_options, "bad")
    broken = "FROM x\nRUN a \\\n"
    with pytest.raises(AssertionError):
        parse_dockerfile(broken)
    with pytest.raises(AssertionError, match="UNDEFINED"):
        image_env(parse_dockerfile("FROM x\nENV A=${UNDEFINED}/bin\n"))
