"""Every command's ``--help``, walked from the click commands themselves (a new command is
covered the day it is added): each option shows its ``MALAUNCH_*`` variable and says what it
does, the description names only what the usage line shows, and nothing is cut off."""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Tuple

import click
import pytest

from malaunch.cli import render, simulate
from malaunch.cli.launch import build_launch_command
from malaunch.cli.tools import tools
from malaunch.plugins import load_plugins
from malaunch.testing import clean_env, run_cli

# Capitals in a description that are words, not placeholders of the usage line.
ACRONYMS = {"HCCL", "JSON", "HTML", "SVG", "YAML", "CPU", "GPU", "NPU", "DIR", "OK", "UTC"}
HELP = ("-h", "--help")


def _commands() -> Iterator[Tuple[List[str], click.Command]]:
    """(words after ``malaunch``, the click command that parses them), for every command."""
    env = clean_env()
    yield [], build_launch_command(load_plugins(env))
    # simulate and render hand their arguments to a parser of their own (with the launch
    # command's options), which is what their --help shows.
    own = {"simulate": simulate.build_command(env), "render": render.build_command(env)}

    def walk(path: List[str], command: click.Command) -> Iterator[Tuple[List[str], click.Command]]:
        yield path, own.get(path[-1], command) if path else command
        if isinstance(command, click.Group):
            for name, sub in sorted(command.commands.items()):
                yield from walk([*path, name], sub)

    for name, sub in sorted(tools.commands.items()):
        yield from walk([name], sub)


COMMANDS = list(_commands())
CASES = [pytest.param(path, command, id=" ".join(path) or "launch") for path, command in COMMANDS]
GROUPS = [case for case in CASES if isinstance(case.values[1], click.Group)]


def test_every_command_is_walked() -> None:
    walked = [" ".join(path) for path, _ in COMMANDS]
    assert walked == [
        "", "logs", "plugins", "ranktable", "ranktable convert", "ranktable generate",
        "ranktable validate", "render", "report", "simulate", "topology",
    ]  # fmt: skip


def _sections(text: str) -> Dict[str, List[str]]:
    """The help's sections: ``usage`` (the usage line and the description) and the lines
    under each ``Name:`` heading."""
    sections: Dict[str, List[str]] = {"usage": []}
    current = "usage"
    for line in text.splitlines():
        heading = re.fullmatch(r"([A-Z][a-z ]+):", line)
        if heading:
            current = heading[1]
            sections[current] = []
        else:
            sections[current].append(line)
    return sections


def _entries(lines: List[str]) -> List[Tuple[str, str]]:
    """The (term, text) entries of an ``Options:`` section, the text joined into one line."""
    entries: List[Tuple[str, str]] = []
    for line in lines:
        if re.match(r"  -", line):
            term, _, text = line.strip().partition("  ")
            entries.append((term, text.strip()))
        elif line.strip() and entries:
            term, text = entries[-1]
            entries[-1] = (term, f"{text} {line.strip()}".strip())
    return entries


def _help(path: List[str]) -> Dict[str, List[str]]:
    result = run_cli([*path, "--help"])
    assert result.code == 0, result.stderr
    assert result.stderr == ""
    return _sections(result.stdout)


@pytest.mark.parametrize(("path", "command"), CASES)
def test_every_option_shows_its_variable_and_says_what_it_does(
    path: List[str], command: click.Command
) -> None:
    entries = _entries(_help(path).get("Options", []))
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    assert len(entries) == len(options) + 1, entries  # and -h, --help
    for term, text in entries:
        if term.startswith(HELP):
            continue
        variables = re.findall(r"env var: (MALAUNCH_[A-Z0-9_]+)", text)
        assert len(variables) == 1, (term, text)
        said = re.sub(r"\[[^\]]*\]", "", text).strip()
        assert re.search(r"[a-z]{3}", said), f"{term}: no description"


@pytest.mark.parametrize(("path", "command"), CASES)
def test_the_description_names_what_the_usage_shows(
    path: List[str], command: click.Command
) -> None:
    usage = _help(path)["usage"]
    line, description = usage[0], " ".join(usage[1:])
    placeholders = set(re.findall(r"\b[A-Z][A-Z0-9]+\b", description)) - ACRONYMS
    missing = [word for word in sorted(placeholders) if not re.search(rf"\b{word}\b", line)]
    assert missing == [], f"{line!r} does not show {missing}"


@pytest.mark.parametrize(("path", "command"), GROUPS)
def test_no_command_line_is_cut_off(path: List[str], command: click.Command) -> None:
    assert isinstance(command, click.Group)
    listed = [line.strip() for line in _help(path)["Commands"] if line.strip()]
    assert sorted(line.split()[0] for line in listed) == sorted(command.commands)
    assert [line for line in listed if line.endswith("...")] == []


def test_the_variable_shown_is_the_one_read() -> None:
    """The help of a tool command names MALAUNCH_<COMMAND>_<PARAMETER>, and that is read."""
    entries = dict(_entries(_help(["topology"])["Options"]))
    assert "[env var: MALAUNCH_TOPOLOGY_TOPOLOGY; default: auto]" in entries["--topology SOURCE"]
    result = run_cli(["topology"], env=clean_env({"MALAUNCH_TOPOLOGY_TOPOLOGY": "nonesuch"}))
    assert result.code == 78
    assert result.stderr.startswith(
        "malaunch: error: MALAUNCH_TOPOLOGY_TOPOLOGY: unknown topology source 'nonesuch' "
    )


def test_render_says_what_num_workers_is_there() -> None:
    """tensorflow_ps's --num-workers runs a local cluster; in render it would run one in
    every pod: its help says so, and a value is refused."""
    entries = dict(_entries(_help(["render"])["Options"]))
    assert entries["--num-workers INTEGER"] == (
        "Not for a rendered job: it plans a whole cluster on one machine; the manifest "
        "describes the cluster with --nodes and --num-ps.  [env var: MALAUNCH_NUM_WORKERS]"
    )
    args = ["render", "tfjob", "--nodes", "2", "--num-workers", "3", "--image", "img"]
    result = run_cli([*args, "--framework", "tensorflow_ps", "--", "python", "t.py"])
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: render: not for a rendered job: --num-workers (it plans a whole "
        "cluster on one machine; the manifest describes the cluster with --nodes and --num-ps)\n"
    )
