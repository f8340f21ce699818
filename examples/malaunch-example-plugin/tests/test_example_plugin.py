"""The example plugin's own tests, written with malaunch's author kit (malaunch.testing).

``malaunch.testing``'s fixtures (``malaunch_plan``, ``malaunch_env``) are a pytest plugin
installed with malaunch: with pytest installed (the ``test`` extra names ``malaunch[testing]``)
they are available without any import or conftest. The helpers (``make_topology``,
``run_cli``, ...) need no pytest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from malaunch_example_plugin import static_file

from malaunch.api import ResolveOptions, TopologyError
from malaunch.testing import PlanFactory, clean_env, make_topology, run_cli


def test_echo_plan_passes_the_invariants(malaunch_plan: PlanFactory) -> None:
    # malaunch_plan finds "echo" through the installed entry points, plans, and runs
    # check_plan() on the result.
    plan = malaunch_plan("echo", make_topology(nodes=2, nproc_per_node=2, node_rank=1))
    assert [p.env["ECHO_RANK"] for p in plan.processes] == ["2", "3"]
    assert {p.env["ECHO_WORLD_SIZE"] for p in plan.processes} == {"4"}


def test_greeting_option(malaunch_plan: PlanFactory) -> None:
    plan = malaunch_plan("echo", make_topology(nodes=1), echo_greeting="hi")
    assert plan.processes[0].env["ECHO_GREETING"] == "hi"


def test_static_file_source(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"hosts": ["192.0.2.1", "192.0.2.2"], "node_rank": 1}))
    topology = static_file.resolve({static_file.VAR: str(path)}, ResolveOptions())
    assert (topology.node_rank, topology.world_size, topology.master_addr) == (1, 2, "192.0.2.1")
    path.write_text(json.dumps({"hosts": ["192.0.2.1"], "node_rank": 3}))
    with pytest.raises(TopologyError, match="node_rank: 3 is not below 1 hosts"):
        static_file.resolve({static_file.VAR: str(path)}, ResolveOptions())


def test_dry_run_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"hosts": ["127.0.0.1"], "nproc_per_node": 2}))
    env = clean_env({static_file.VAR: str(path)})
    result = run_cli(["--framework", "echo", "--dry-run", "--", "python", "x.py"], env=env)
    assert result.code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["topology"]["source"] == "static-file"
    assert [p["env"]["ECHO_RANK"] for p in plan["processes"]] == ["0", "1"]
