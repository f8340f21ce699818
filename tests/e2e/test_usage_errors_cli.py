"""A newcomer's typos: each is a usage error (64) that names the one closest name when one is
close, and none when none is; a Python script given without ``python``; a misspelt
``MALAUNCH_*`` variable."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import List

import pytest

from malaunch.testing import clean_env, run_cli
from malaunch.testing.commands import run_dir

SOURCES = (
    "kubeflow, local, mindx, mindx-pytorch, mindx-tensorflow, ranktable, slurm, tf-config, "
    "tf-ps, volcano, volcano-tasks"
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--framwork", "torch_ddp"], "no such option: --framwork (did you mean --framework?)"),
        (
            ["--nproc_per_node", "2"],
            "no such option: --nproc_per_node (did you mean --nproc-per-node?)",
        ),
        (["--MAX-RESTARTS", "2"], "no such option: --MAX-RESTARTS (did you mean --max-restarts?)"),
        # --hang-timeout and --wait-timeout are as close: naming one would mislead
        (["--timeout", "3"], "no such option: --timeout"),
        (["--xyz"], "no such option: --xyz"),
    ],
)
def test_an_unknown_option_gets_one_suggestion_or_none(args: List[str], message: str) -> None:
    result = run_cli([*args, "--", "python", "train.py"])
    assert result.code == 64
    assert result.stderr == f"malaunch: error: {message}; see `malaunch --help`\n"


@pytest.mark.parametrize(
    ("command", "where", "typo", "meant"),
    [
        (["simulate", "--nodes", "2"], "simulate", "--framwork", "--framework"),
        (["render", "volcano"], "render", "--nods", "--nodes"),
        (["topology"], "topology", "--jsn", "--json"),
        (["logs"], "logs", "--rank", "--ranks"),
        (["ranktable", "generate", "out.json"], "ranktable generate", "--device", "--devices"),
    ],
)
def test_each_command_suggests_its_own_options(
    tmp_path: Path, command: List[str], where: str, typo: str, meant: str
) -> None:
    result = run_cli([*command, typo, "x"], cwd=tmp_path)
    assert result.code == 64
    assert result.stderr == (
        f"malaunch: error: no such option: {typo} (did you mean {meant}?); see "
        f"`malaunch {where} --help`\n"
    )


def test_every_option_is_suggested_for_its_underscore_and_upper_case_spellings() -> None:
    """The class of slips the normalisation covers, over every launch option."""
    from malaunch.cli.launch import build_launch_command  # noqa: PLC0415 (what is walked)
    from malaunch.plugins import load_plugins  # noqa: PLC0415 (what is walked)
    from malaunch.wording import closest  # noqa: PLC0415 (the function under test)

    command = build_launch_command(load_plugins(clean_env()))
    flags = [flag for param in command.params for flag in param.opts if flag.startswith("--")]
    assert len(flags) > 40
    for flag in flags:
        for typed in ("--" + flag[2:].replace("-", "_"), flag.upper()):
            if typed != flag:
                assert closest(typed, flags) == flag, typed


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--framework", "pytorch"],
            64,
            "--framework: unknown framework 'pytorch' (did you mean torch_ddp?); see `malaunch "
            "plugins`",
        ),
        (
            ["--framework", "TORCH_DDP"],
            64,
            "--framework: unknown framework 'TORCH_DDP' (did you mean torch_ddp?); see `malaunch "
            "plugins`",
        ),
        # nothing close: a plugin that is not installed (78), the installed ones listed
        (
            ["--framework", "horovod"],
            78,
            "--framework: unknown framework 'horovod' (installed: mindspore, tensorflow_ps, "
            "torch_ddp); "
            "see `malaunch plugins`",
        ),
        (
            ["--framework", "torch_ddp", "--topology", "volcan"],
            64,
            "--topology: unknown topology source 'volcan' (did you mean volcano?); see "
            "`malaunch plugins`",
        ),
        (
            ["--framework", "torch_ddp", "--topology", "octopus"],
            78,
            f"--topology: unknown topology source 'octopus' (installed: {SOURCES}, or auto); see "
            "`malaunch plugins`",
        ),
    ],
)
def test_a_mistyped_plugin_name_is_a_usage_error(
    tmp_path: Path, args: List[str], code: int, message: str
) -> None:
    env = clean_env({"MALAUNCH_DISABLE_PLUGINS": "example,paddle"})  # the built-ins only
    result = run_cli([*args, "--dry-run", "--", "python", "train.py"], env=env, cwd=tmp_path)
    assert result.code == code
    assert result.stderr == f"malaunch: error: {message}\n"


def test_the_topology_command_suggests_a_source_too() -> None:
    result = run_cli(["topology", "--topology", "tf_ps"])
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: --topology: unknown topology source 'tf_ps' (did you mean tf-ps?); see "
        "`malaunch plugins`\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["simulate", "--platform", "volcan", "--nodes", "2"],
            "--platform: 'volcan' is not one of modelarts, octopus, volcano, tf-ps, pytorchjob, "
            "volcano-pytorch, ascendjob (did you mean volcano?)",
        ),
        (
            ["simulate", "--platform", "slurm", "--nodes", "2"],
            "--platform: 'slurm' is not one of modelarts, octopus, volcano, tf-ps, pytorchjob, "
            "volcano-pytorch, ascendjob",
        ),
        (
            ["render", "pytorch", "--nodes", "2"],
            "TARGET: 'pytorch' is not one of volcano, pytorchjob, ascendjob, tfjob (did you "
            "mean pytorchjob?)",
        ),
        (
            ["--framework", "torch_ddp", "--hang-stacks", "pyspy"],
            "--hang-stacks: 'pyspy' is not one of auto, py-spy, faulthandler, none (did you "
            "mean py-spy?)",
        ),
    ],
)
def test_a_mistyped_choice_gets_one_suggestion_or_none(args: List[str], message: str) -> None:
    result = run_cli([*args, "--", "python", "train.py"])
    assert result.code == 64
    assert result.stderr == f"malaunch: error: {message}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["ranktable", "valdate", "t.json"],
            "no such command: malaunch ranktable valdate (did you mean `malaunch ranktable "
            "validate`?)",
        ),
        (["ranktable", "check", "t.json"], "no such command: malaunch ranktable check"),
    ],
)
def test_a_mistyped_subcommand_gets_one_suggestion_or_none(args: List[str], message: str) -> None:
    result = run_cli(args)
    assert result.code == 64
    assert result.stderr == f"malaunch: error: {message}\n"


def test_a_group_without_its_subcommand_shows_its_help() -> None:
    # click 8.2+ raised the whole help as one error line, exit 64
    result = run_cli(["ranktable"])
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout.startswith("Usage: malaunch ranktable [OPTIONS] COMMAND [ARGS]...\n")


def _script(folder: Path, text: str, executable: bool) -> Path:
    path = folder / "train.py"
    path.write_text(text)
    mode = path.stat().st_mode
    path.chmod(mode | stat.S_IXUSR if executable else mode & ~stat.S_IXUSR)
    return path


@pytest.mark.parametrize(
    ("program", "text", "executable", "message"),
    [
        (
            "train.py",
            "print('hi')\n",
            False,
            "'train.py' is not a program on PATH: did you mean `python train.py`?",
        ),
        (
            "train.py",
            "#!/usr/bin/env python3\nprint('hi')\n",
            True,
            "'train.py' is not a program on PATH: did you mean `./train.py`?",
        ),
        (
            "./train.py",
            "#!/usr/bin/env python3\nprint('hi')\n",
            False,
            "'./train.py' is not executable: did you mean `python ./train.py`?",
        ),
        (
            "./train.py",
            "print('hi')\n",
            True,
            "'./train.py' has no #! line: did you mean `python ./train.py`?",
        ),
    ],
)
def test_a_script_without_python_says_how_to_run_it(
    tmp_path: Path, program: str, text: str, executable: bool, message: str
) -> None:
    # It used to be "cannot start rank 0: 'train.py': No such file or directory" (71), after
    # the topology wait, though the file is right there.
    _script(tmp_path, text, executable)
    args = ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs"), program]
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 64
    assert result.stderr == f"malaunch: error: {message}\n"
    assert not (tmp_path / "logs").exists()


def test_a_simulation_says_it_once_before_any_node_starts(tmp_path: Path) -> None:
    _script(tmp_path, "print('hi')\n", False)
    args = ["simulate", "--nodes", "2", "--framework", "torch_ddp", "train.py"]
    result = run_cli([*args, "--log-dir", str(tmp_path / "logs")], cwd=tmp_path)
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: 'train.py' is not a program on PATH: did you mean `python train.py`?\n"
    )


def test_an_executable_script_with_its_interpreter_line_runs(tmp_path: Path) -> None:
    _script(tmp_path, f"#!{sys.executable}\nprint('hi')\n", True)
    args = ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs"), "./train.py"]
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert result.stdout == "[rank 0] hi\n"


def test_a_script_on_path_is_a_program(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir, f"#!{sys.executable}\nprint('from PATH')\n", True)
    _script(tmp_path, "print('here')\n", False)  # the same name in the launch directory
    env = clean_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    args = ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs"), "train.py"]
    result = run_cli(args, env=env, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert result.stdout == "[rank 0] from PATH\n"


def test_a_misspelt_variable_is_named_with_the_closest_option() -> None:
    env = clean_env({"MALAUNCH_FRAMEWRK": "torch_ddp"})
    result = run_cli(["--dry-run", "--", "python", "train.py"], env=env)
    assert result.code == 64
    assert result.stderr == (
        "malaunch: warning: MALAUNCH_FRAMEWRK matches no option of malaunch (did you mean "
        "MALAUNCH_FRAMEWORK?); ignored\n"
        "malaunch: error: missing --framework (or MALAUNCH_FRAMEWORK); see `malaunch plugins`\n"
    )


def test_variables_of_other_commands_and_of_malaunch_itself_are_no_typo(tmp_path: Path) -> None:
    env = clean_env(
        {
            "MALAUNCH_XYZZY": "1",  # nothing close
            "MALAUNCH_NODES": "2",  # simulate's and render's
            "MALAUNCH_TOPOLOGY_TOPOLOGY": "local",  # the topology command's
            "MALAUNCH_DISABLE_PLUGINS": "example",  # read by the plugin loader
            "MALAUNCH_VOLCANO_DIR": str(tmp_path),  # read by the volcano source
            "MALAUNCH_FRAMEWORK": "torch_ddp",
        }
    )
    result = run_cli(["--dry-run", "--", "python", "train.py"], env=env, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert result.stderr == (
        "malaunch: warning: MALAUNCH_XYZZY matches no option of malaunch; ignored\n"
    )


def test_one_warning_for_a_simulation_and_none_from_its_workers(tmp_path: Path) -> None:
    """The node launchers and the workers (here each running malaunch itself) inherit the
    variable: they do not warn again."""
    nested = "import subprocess; subprocess.run(['malaunch', 'plugins', '--json'], check=True)"
    env = clean_env({"MALAUNCH_FRAMEWRK": "x"})
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    args = ["simulate", "--nodes", "2", "--platform", "volcano", "--framework", "torch_ddp"]
    args += ["--log-dir", str(tmp_path / "logs"), "--", sys.executable, "-c", nested]
    result = run_cli(args, env=env, cwd=tmp_path)
    assert result.code == 0, result.stderr
    said = (result.stdout + result.stderr).splitlines()  # workers' lines are on stdout
    warnings = [line for line in said if "MALAUNCH_FRAMEWRK" in line]
    assert warnings == [
        "malaunch: warning: MALAUNCH_FRAMEWRK matches no option of malaunch (did you mean "
        "MALAUNCH_FRAMEWORK?); ignored"
    ]
    worker_log = (run_dir(tmp_path / "logs") / "node-1" / "worker-1.log").read_text()
    assert "torch_ddp" in [row["name"] for row in json.loads(worker_log)]
