"""The test kit for malaunch and its plugins: everything a plugin's tests import.

Topology builders (``builders``), plan invariants (``checks``), running the installed command
(``commands``), clean environments (``environment``), plans through the installed plugins
(``planning``), fake distributions (``distributions``): none of them needs pytest, so a
plugin's own test runner (or a script) can use them. The fixtures (``fixtures``) are an
opt-in pytest plugin, installed as the ``pytest11`` entry point ``malaunch``: they only define
fixtures, so nothing changes for a test suite that does not ask for them. They are not
imported here (pytest finds them through the entry point; ``pip install 'malaunch[testing]'``
brings pytest).
"""

from __future__ import annotations

from malaunch.testing.builders import make_ps_topology, make_rank_table_topology, make_topology
from malaunch.testing.checks import CONTRACT_KEYS, check_plan
from malaunch.testing.commands import (
    CliResult,
    malaunch_executable,
    pid_alive,
    read_summary,
    run_cli,
    run_dir,
    wait_gone,
)
from malaunch.testing.distributions import write_fake_distribution
from malaunch.testing.environment import clean_env, read_env_file
from malaunch.testing.planning import PlanFactory, make_plan

__all__ = [
    "CONTRACT_KEYS",
    "CliResult",
    "PlanFactory",
    "check_plan",
    "clean_env",
    "make_plan",
    "make_ps_topology",
    "make_rank_table_topology",
    "make_topology",
    "malaunch_executable",
    "pid_alive",
    "read_env_file",
    "read_summary",
    "run_cli",
    "run_dir",
    "wait_gone",
    "write_fake_distribution",
]
