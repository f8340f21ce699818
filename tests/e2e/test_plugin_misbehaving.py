"""A third-party plugin's code that raises, exits or returns what cannot run is exit 78 on one
line naming the plugin and its distribution; never an internal error (70), a rank's exit code
passed off by ``sys.exit``, nor a job that runs two ranks 0 into one log.

The misbehaviours are generated: a plan or a source's ``detect`` raising any exception type
with any message (several lines, thousands of characters), calling ``sys.exit``, or returning
junk or a plan that breaks the contract.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from malaunch.testing import clean_env, run_cli, write_fake_distribution

PLUGIN = """
import os
import json
from pathlib import Path
from malaunch.api import Framework, LaunchPlan, ProcessSpec, TopologySource, hookimpl

BEHAVIOUR = {behaviour!r}


def _spec(options, command, rank, log):
    base = Path(options.cwd)
    return ProcessSpec(role="worker", rank=rank, local_rank=rank, argv=tuple(command),
                       env={{"A": "x\\0y"}} if BEHAVIOUR == "nul" else {{}}, cwd=str(base),
                       log_file=str(base / options.log_dir / log))


def plan(topology, command, options):
    if BEHAVIOUR.startswith("raise:"):
        _, kind, text = BEHAVIOUR.split(":", 2)
        raise {{"runtime": RuntimeError, "key": KeyError, "type": TypeError,
               "os": OSError, "recursion": RecursionError}}[kind](text)
    if BEHAVIOUR.startswith("exit:"):
        raise SystemExit(int(BEHAVIOUR.split(":")[1]))
    if BEHAVIOUR in ("none", "dict", "list"):
        return {{"none": None, "dict": {{"processes": []}}, "list": []}}[BEHAVIOUR]
    two = [_spec(options, command, 0, "a.log"), _spec(options, command, 1, "b.log")]
    if BEHAVIOUR == "same-rank":
        two[1] = _spec(options, command, 0, "b.log")
    if BEHAVIOUR == "same-log":
        two[1] = _spec(options, command, 1, "a.log")
    return LaunchPlan(framework="odd", topology=topology, processes=tuple(two))


def detect(env):
    if BEHAVIOUR == "detect":
        raise ValueError("detect exploded")
    return False


@hookimpl
def malaunch_register_frameworks():
    return [Framework(name="odd", plan=plan, help="misbehaves")]


@hookimpl
def malaunch_register_topology_sources():
    return [TopologySource(name="odd-source", resolve=lambda env, options: None, detect=detect,
                           auto_order=1, help="misbehaves")]
"""

BEHAVIOURS = st.one_of(
    st.builds(
        lambda kind, text: f"raise:{kind}:{text}",
        st.sampled_from(["runtime", "key", "type", "os", "recursion"]),
        st.text(
            st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=3000
        ),
    ),
    st.builds(lambda code: f"exit:{code}", st.integers(0, 255)),
    st.sampled_from(["none", "dict", "list", "same-rank", "same-log", "nul", "detect"]),
)


@settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(behaviour=BEHAVIOURS)
def test_a_misbehaving_plugin_is_one_line_and_78(tmp_path: Path, behaviour: str) -> None:
    plugins = tmp_path / f"plugins-{abs(hash(behaviour))}"
    plugins.mkdir()
    write_fake_distribution(
        plugins,
        "malaunch-odd",
        "0.3",
        {"odd": "fake_odd"},
        {"fake_odd": PLUGIN.format(behaviour=behaviour)},
    )
    framework = "torch_ddp" if behaviour == "detect" else "odd"
    args = [
        "--framework",
        framework,
        "--log-dir",
        str(tmp_path / "logs"),
        "--",
        "python",
        "-c",
        "1",
    ]
    result = run_cli(args, env=clean_env({"PYTHONPATH": str(plugins)}), cwd=tmp_path)
    assert result.code == 78, (behaviour[:80], result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("malaunch: error:")]
    assert len(errors) == 1, result.stderr
    assert "of distribution malaunch-odd 0.3" in errors[0]
    assert len(errors[0]) < 600
    assert "Traceback" not in result.stderr


CHATTY = """
import os
from malaunch.api import Framework, LaunchPlan, ProcessSpec, TopologySource, hookimpl


def plan(topology, command, options):
    print("planning for", topology.world_size, "ranks")
    os.write(1, b"a raw write on descriptor 1\\n")
    spec = ProcessSpec(role="worker", rank=0, local_rank=0, argv=tuple(command), env={},
                       cwd=options.cwd, log_file=os.path.join(options.cwd, "w0.log"))
    return LaunchPlan(framework="chatty", topology=topology, processes=(spec,))


def detect(env):
    print("looking at", len(env), "variables")
    return False


@hookimpl
def malaunch_register_frameworks():
    return [Framework(name="chatty", plan=plan, help="prints")]


@hookimpl
def malaunch_register_topology_sources():
    return [TopologySource(name="chatty-source", resolve=lambda env, options: None,
                           detect=detect, auto_order=1, help="prints")]
"""


def test_what_a_plugin_prints_never_gets_into_the_dry_runs_json(tmp_path: Path) -> None:
    # `malaunch --dry-run | jq`: the plan's JSON began with the plugin's debug lines.
    write_fake_distribution(tmp_path, "malaunch-chatty", "1.0", {"chatty": "fake_chatty"},
                            {"fake_chatty": CHATTY})  # fmt: skip
    env = clean_env({"PYTHONPATH": str(tmp_path)})
    result = run_cli(["--framework", "chatty", "--dry-run", "--", "true"], env=env, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["framework"] == "chatty"
    for line in ("planning for 1 ranks", "a raw write on descriptor 1", "looking at"):
        assert line in result.stderr
    topology = run_cli(["topology", "--json"], env=env, cwd=tmp_path)
    assert topology.code == 0, topology.stderr
    json.loads(topology.stdout)
