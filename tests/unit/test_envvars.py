"""The MALAUNCH_* variables: every one the code names is an option's twin or listed (and
documented) as none, so that the stray-variable warning never fires on malaunch's own."""

from __future__ import annotations

import re
from pathlib import Path

from malaunch.cli import render, simulate
from malaunch.cli.envvars import NOT_OPTIONS, option_variables
from malaunch.cli.launch import build_launch_command
from malaunch.cli.tools import tools
from malaunch.plugins import load_plugins
from malaunch.testing import clean_env

ROOT = Path(__file__).parents[2]
NAME = re.compile(r"\bMALAUNCH_[A-Z0-9_]*[A-Z0-9]\b")


def test_every_variable_the_code_names_is_known() -> None:
    env = clean_env()
    commands = [build_launch_command(load_plugins(env)), tools]
    commands += [simulate.build_command(env), render.build_command(env)]
    known = {name for command in commands for name in option_variables(command)}
    assert {"MALAUNCH_FRAMEWORK", "MALAUNCH_TOPOLOGY_TOPOLOGY", "MALAUNCH_NODES"} <= known
    sources = [*(ROOT / "core").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]
    # (the warning's own module names typos as examples)
    sources = [path for path in sources if path.name != "envvars.py"]
    named = {name for path in sources for name in NAME.findall(path.read_text("utf-8"))}
    assert sorted(named - known - set(NOT_OPTIONS)) == []


def test_the_variables_that_are_no_options_are_documented() -> None:
    job = (ROOT / "docs" / "job.md").read_text(encoding="utf-8")
    assert [name for name in NOT_OPTIONS if f"`{name}`" not in job] == []
