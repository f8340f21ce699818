"""A real third-party plugin package (examples/malaunch-example-plugin), installed with pip.

CI installs it into the test virtualenv (scripts/test.sh, .ci/run); these tests fail, not
skip, when it is missing. Duplicate and broken plugins are fake distributions written on the
fly and put on PYTHONPATH, which exercises the same entry-point machinery without pip.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Dict, List

import pytest

from malaunch.testing import clean_env, read_env_file, run_cli, write_fake_distribution

EXAMPLE = Path(__file__).parents[2] / "examples" / "malaunch-example-plugin"
DIST = "malaunch-example-plugin"


@pytest.fixture(scope="module", autouse=True)
def _example_installed() -> None:
    try:
        metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        pytest.fail(
            f"{DIST} is not installed; run: {sys.executable} -m pip install {EXAMPLE}",
            pytrace=False,
        )


def _static_env(tmp_path: Path, **extra: str) -> Dict[str, str]:
    path = tmp_path / "cluster.json"
    doc = {"hosts": ["127.0.0.1"], "nproc_per_node": 2, "master_port": 29555, "job_id": "demo"}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return clean_env({"STATIC_TOPOLOGY_FILE": str(path), **extra})


def test_listed_with_distribution_and_version() -> None:
    version = metadata.version(DIST)
    result = run_cli(["plugins"])
    assert result.code == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["echo", "framework", DIST, version] == rows[1 + [r[0] for r in rows[1:]].index("echo")][
        :4
    ]
    result = run_cli(["plugins", "--json"])
    by_name = {row["name"]: row for row in json.loads(result.stdout)}
    for name, kind in (("echo", "framework"), ("static-file", "topology")):
        row = by_name[name]
        assert (row["kind"], row["distribution"], row["version"], row["plugin"]) == (
            kind, DIST, version, "example",
        )  # fmt: skip
        assert row["hooks"] == [
            "malaunch_register_frameworks",
            "malaunch_register_topology_sources",
        ]


def test_plans_a_dry_run_with_its_source_chosen_by_auto(tmp_path: Path) -> None:
    args = ["--framework", "echo", "--echo-greeting", "hello", "--log-dir", str(tmp_path / "l")]
    result = run_cli([*args, "--dry-run", "--", "python", "x.py"], env=_static_env(tmp_path))
    assert result.code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["framework"] == "echo"
    assert plan["topology"]["source"] == "static-file"
    assert [
        (p["rank"], p["env"]["ECHO_RANK"], p["env"]["ECHO_GREETING"]) for p in plan["processes"]
    ] == [
        (0, "0", "hello"),
        (1, "1", "hello"),
    ]
    assert {p["env"]["ECHO_MASTER"] for p in plan["processes"]} == {"127.0.0.1:29555"}
    assert {p["env"]["PYTHONUNBUFFERED"] for p in plan["processes"]} == {"1"}
    assert [p["log_file"] for p in plan["processes"]] == [
        str(tmp_path / "l" / "echo-0.log"),
        str(tmp_path / "l" / "echo-1.log"),
    ]


def test_framework_options_are_in_the_help() -> None:
    result = run_cli(["--help"])
    assert result.code == 0
    assert "--echo-greeting TEXT" in result.stdout
    assert "[echo] Passed to every process as" in result.stdout
    help_text = " ".join(result.stdout.split())  # click wraps long lines
    for flag, prefix in (
        ("--ms-mode", "[mindspore] ranktable:"),
        ("--tf-flags / --no-tf-flags", "[tensorflow_ps] Append"),
        ("--torch-mode", "[torch_ddp] native:"),
    ):
        assert flag in help_text
        assert prefix in help_text


def test_builtins_are_listed_beside_it() -> None:
    rows = {row["name"]: row for row in json.loads(run_cli(["plugins", "--json"]).stdout)}
    for name in ("mindspore", "tensorflow_ps", "torch_ddp"):
        assert (rows[name]["kind"], rows[name]["distribution"], rows[name]["plugin"]) == (
            "framework", "malaunch", name,
        )  # fmt: skip
    assert {"local", "ranktable", "tf-ps", "tf-config", "volcano"} <= set(rows)


def test_disabled_by_name(tmp_path: Path) -> None:
    env = _static_env(tmp_path, MALAUNCH_DISABLE_PLUGINS="example")
    listed = json.loads(run_cli(["plugins", "--json"], env=env).stdout)
    assert not {"echo", "static-file"} & {row["name"] for row in listed}
    result = run_cli(["--framework", "echo", "--dry-run", "--", "true"], env=env)
    assert result.code == 78
    assert result.stderr.startswith(
        "malaunch: error: --framework: unknown framework 'echo' (installed: "
    )


DUPLICATE = """\
from malaunch.hookspecs import hookimpl
from malaunch.models import Framework

@hookimpl
def malaunch_register_frameworks():
    return [Framework(name="echo", plan=lambda *args: None)]
"""


def test_duplicate_framework_name_is_exit_78_naming_both(tmp_path: Path) -> None:
    write_fake_distribution(tmp_path, "malaunch-echo-clone", "2.0", {"clone": "fake_clone"},
                            {"fake_clone": DUPLICATE})  # fmt: skip
    env = clean_env({"PYTHONPATH": str(tmp_path)})
    for args in (["plugins"], ["--framework", "torch_ddp", "--dry-run", "--", "true"]):
        result = run_cli(args, env=env)
        assert result.code == 78, result.stderr
        # Entry points come in no defined order, so either may be named first.
        assert result.stderr.startswith("malaunch: error: framework 'echo' is registered twice: by")
        assert f"plugin 'example' of distribution {DIST} {metadata.version(DIST)}" in result.stderr
        assert "plugin 'clone' of distribution malaunch-echo-clone 2.0" in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_broken_plugin_is_exit_78_naming_the_distribution(tmp_path: Path) -> None:
    write_fake_distribution(tmp_path, "malaunch-broken", "0.1", {"broken": "fake_broken"},
                            {"fake_broken": "raise ImportError('needs libfoo')\n"})  # fmt: skip
    env = clean_env({"PYTHONPATH": str(tmp_path)})
    result = run_cli(["--framework", "torch_ddp", "--dry-run", "--", "true"], env=env)
    assert result.code == 78
    assert result.stderr == (
        "malaunch: error: cannot load plugin 'broken' of distribution malaunch-broken 0.1 "
        "(fake_broken): ImportError: needs libfoo\n"
    )
    assert "Traceback" not in result.stderr
    env["MALAUNCH_DISABLE_PLUGINS"] = "broken"
    assert run_cli(["plugins"], env=env).code == 0


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ("import sys\nsys.exit(0)\n", "it called sys.exit(0)"),
        ("raise SystemExit('bye')\n", "it called sys.exit('bye')"),
        ("raise KeyboardInterrupt('not a Ctrl-C')\n", "KeyboardInterrupt: not a Ctrl-C"),
    ],
)
def test_a_plugin_that_exits_as_it_is_imported_is_78(body: str, shown: str, tmp_path: Path) -> None:
    """A ``sys.exit(0)`` on import used to end the dry run with exit 0 and nothing printed; a
    ``KeyboardInterrupt`` passed for a Ctrl-C (130)."""
    write_fake_distribution(tmp_path, "malaunch-quits", "0.2", {"quits": "fake_quits"},
                            {"fake_quits": body})  # fmt: skip
    env = clean_env({"PYTHONPATH": str(tmp_path)})
    for args in (["--framework", "torch_ddp", "--dry-run", "--", "true"], ["plugins"]):
        result = run_cli(args, env=env)
        assert (result.code, result.stdout) == (78, ""), result.stderr
        assert result.stderr == (
            "malaunch: error: cannot load plugin 'quits' of distribution malaunch-quits 0.2 "
            f"(fake_quits): {shown}\n"
        )


CLASHING_OPTION = """\
import click
from malaunch.hookspecs import hookimpl
from malaunch.models import Framework

@hookimpl
def malaunch_register_frameworks():
    return [Framework(name="clash", plan=lambda *a: None, options=[click.Option(["--log-dir"])])]
"""


def test_an_option_that_clashes_with_the_core_is_exit_78(tmp_path: Path) -> None:
    write_fake_distribution(tmp_path, "malaunch-clash", "0.1", {"clash": "fake_clash"},
                            {"fake_clash": CLASHING_OPTION})  # fmt: skip
    result = run_cli(["--help"], env=clean_env({"PYTHONPATH": str(tmp_path)}))
    assert result.code == 78
    assert "framework 'clash' (plugin 'clash' of distribution malaunch-clash 0.1) adds option" in (
        result.stderr
    )


def test_the_example_own_tests_pass_with_the_author_kit() -> None:
    # Its tests use the malaunch_plan fixture, which comes from the pytest11 entry point.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE)],
        env=clean_env(),
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout


BUGGY = """\
from malaunch.api import Framework, hookimpl

def plan(topology, command, options):
    return {}["no such key"]

@hookimpl
def malaunch_register_frameworks():
    return [Framework(name="buggy", plan=plan)]
"""


def test_a_plugins_bug_is_exit_78_naming_it_and_debug_shows_it(tmp_path: Path) -> None:
    """A plugin's bug is neither a worker's exit 1 nor malaunch's own (70): one line naming the
    plugin and its distribution, 78; --debug adds the traceback above the same line."""
    write_fake_distribution(tmp_path, "malaunch-buggy", "0.1", {"buggy": "fake_buggy"},
                            {"fake_buggy": BUGGY})  # fmt: skip
    env = clean_env({"PYTHONPATH": str(tmp_path)})
    args = ["--framework", "buggy", "--dry-run", "--", "true"]
    result = run_cli(args, env=env)
    assert (result.code, result.stdout) == (78, "")
    line = (
        "malaunch: error: framework 'buggy' (plugin 'buggy' of distribution malaunch-buggy 0.1) "
        "failed: KeyError: 'no such key'"
    )
    assert result.stderr == line + "\n"
    result = run_cli(["--debug", *args], env=env)
    assert result.code == 78
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "fake_buggy.py" in result.stderr
    assert lines[-1] == line


DECLARING = """\
from malaunch.api import Framework, hookimpl

@hookimpl
def malaunch_register_frameworks():
    return [Framework(name="fakepaddle", plan=lambda *a: None, launcher="fake.launch",
                      launcher_vars=["FAKE_TRAINER_ID", "FAKE_TRAINERS_NUM"])]
"""


def test_auto_refuses_inside_a_declared_launchers_worker(tmp_path: Path) -> None:
    write_fake_distribution(tmp_path, "malaunch-fakepaddle", "1.0",
                            {"fakepaddle": "fake_paddle"}, {"fake_paddle": DECLARING})  # fmt: skip
    env = clean_env({"PYTHONPATH": str(tmp_path), "FAKE_TRAINERS_NUM": "4"})
    args = ["--framework", "torch_ddp", "--dry-run", "--", "python", "train.py"]
    result = run_cli(args, env=env)
    assert result.code == 65
    assert result.stderr == (
        "malaunch: error: nested launch: FAKE_TRAINERS_NUM is set, so this runs inside a "
        "fake.launch worker (framework fakepaddle) that already has its rank; run the "
        "command itself there, or start a separate job on purpose with --topology local\n"
    )
    assert run_cli([*args[:2], "--topology", "local", *args[2:]], env=env).code == 0


PORT_SEER = """\
from malaunch.api import Framework, LaunchPlan, ProcessSpec, hookimpl

def plan(topology, command, options):
    process = ProcessSpec(role="worker", rank=topology.local_devices[0].rank, local_rank=0,
                          argv=tuple(command), env={"SEEN_JOB_PORT": str(options.job_port)},
                          cwd=options.cwd, log_file=options.log_dir + "/w.log")
    return LaunchPlan(framework="portseer", topology=topology, processes=(process,))

@hookimpl
def malaunch_register_frameworks():
    return [Framework(name="portseer", plan=plan)]
"""


@pytest.mark.parametrize(
    ("options", "seen"),
    [
        (["--job-port", "31000"], "31000"),
        (["--master-port", "29500"], "29501"),  # master port + 1 (docs/job.md)
        (["--master-port", "29500", "--no-job-channel"], "None"),
        (["--topology", "local"], "None"),  # one node: no channel
    ],
)
def test_the_plan_sees_the_job_port(tmp_path: Path, options: List[str], seen: str) -> None:
    write_fake_distribution(tmp_path, "malaunch-portseer", "1.0", {"portseer": "fake_portseer"},
                            {"fake_portseer": PORT_SEER})  # fmt: skip
    volcano = read_env_file(Path(__file__).parents[1] / "fixtures/shared/volcano_env_3workers.env")
    env = clean_env({**volcano, "PYTHONPATH": str(tmp_path)})
    args = ["--framework", "portseer", *options, "--nproc-per-node", "1", "--log-dir", "/tmp/l"]
    result = run_cli([*args, "--dry-run", "--", "python", "x.py"], env=env)
    assert result.code == 0, result.stderr
    [process] = json.loads(result.stdout)["processes"]
    assert process["env"]["SEEN_JOB_PORT"] == seen
