"""The classes of option values the generated suite (``test_hostile_generated.py``) found
mishandled, each pinned with its exact line (issue 18, point 10).

Runs the installed ``malaunch``; each case names what the launcher must say.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from malaunch.testing import clean_env, run_cli

DRY = ["--framework", "torch_ddp", "--topology", "local", "--dry-run", "--", "true"]


@pytest.mark.parametrize("value", ["no", "off", "0", "false"])
def test_malaunch_debug_no_means_no_traceback(value: str) -> None:
    """``MALAUNCH_DEBUG=no`` is false, as click reads it: an error comes without a traceback."""
    result = run_cli(
        ["--framework", "nope", "--", "true"], env=clean_env({"MALAUNCH_DEBUG": value})
    )
    assert result.code == 78
    assert result.stderr.startswith("malaunch: error: --framework: unknown framework 'nope'")
    assert len(result.stderr.splitlines()) == 1


def test_a_malaunch_debug_click_refuses_is_one_line_without_traceback() -> None:
    result = run_cli(DRY, env=clean_env({"MALAUNCH_DEBUG": "\u0661"}))
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: MALAUNCH_DEBUG: '\u0661' is not a valid boolean; "
        "use one of 1, 0, true, false, yes, no, on, off\n"
    )


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (["--", "true"], {"MALAUNCH_FRAMEWORK": "nope"},
         "MALAUNCH_FRAMEWORK: unknown framework 'nope' (installed: "),
        (["--framework", "torch_ddp", "--dry-run", "--", "true"], {"MALAUNCH_TOPOLOGY": "nope"},
         "MALAUNCH_TOPOLOGY: unknown topology source 'nope' (installed: "),
        (["topology"], {"MALAUNCH_TOPOLOGY_TOPOLOGY": "nope"},
         "MALAUNCH_TOPOLOGY_TOPOLOGY: unknown topology source 'nope' (installed: "),
        (["logs", "."], {"MALAUNCH_LOGS_RANKS": ":"},
         "MALAUNCH_LOGS_RANKS ':': expected all, none, or numbers like 0,3-5 (got ':')"),
        (["render", "volcano", "--nodes", "1", "--framework", "torch_ddp", "--", "true"],
         {"MALAUNCH_IMAGE": "a b"}, "MALAUNCH_IMAGE 'a b': expected an image reference without "
         "spaces"),
        (DRY, {"MALAUNCH_CONDA_ENV": "nope"}, "conda env 'nope' (from MALAUNCH_CONDA_ENV) not "
         "found; tried "),
        (["ranktable", "generate", "out.json", "--server-id", "10.0.0.1"],
         {"MALAUNCH_RANKTABLE_GENERATE_DEVICES": "x"},
         'MALAUNCH_RANKTABLE_GENERATE_DEVICES "x": "x" is not a device id or range'),
    ],
)  # fmt: skip
def test_a_value_checked_after_parsing_names_its_variable(
    args: list[str], env: dict[str, str], line: str, tmp_path: Path
) -> None:
    """Values checked after click parsed them (plugin names, render fields, files) are
    blamed on the MALAUNCH_ variable they came from, as click's own refusals are."""
    result = run_cli(args, env=clean_env(env), cwd=tmp_path)
    assert result.code in (64, 66, 78)
    assert result.stderr.startswith(f"malaunch: error: {line}"), result.stderr
    assert len(result.stderr.splitlines()) == 1


RENDER = ["render", "volcano", "--nodes", "1", "--framework", "torch_ddp", "--image", "i:1"]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--framework", "torch_ddp", "--restart-on", "", "--dry-run", "--", "true"],
         "--restart-on"),
        (["--framework", "", "--dry-run", "--", "true"], "--framework"),
        (["--framework", "torch_ddp", "--conda-env", "", "--dry-run", "--", "true"],
         "--conda-env"),
        (["--framework", "torch_ddp", "--log-dir", "", "--dry-run", "--", "true"], "--log-dir"),
        ([*RENDER, "--forward-signals", "", "--", "true"], "--forward-signals"),
        ([*RENDER, "--path-mapping", "", "--", "true"], "--path-mapping"),
        ([*RENDER, "--queue", "", "--", "true"], "--queue"),
        (["logs", "--grep", "", "."], "--grep"),
        (["report", ".", "--html", ""], "--html"),
        (["ranktable", "validate", ""], "FILE"),
    ],
)  # fmt: skip
def test_an_empty_value_that_means_nothing_is_refused(args: list[str], option: str) -> None:
    """It meant the default (``--restart-on ''``: any code), or nothing at all."""
    result = run_cli(args)
    assert (result.code, result.stdout) == (64, "")
    assert result.stderr == f"malaunch: error: {option}: expected a value, got an empty string\n"


@pytest.mark.parametrize("how", ["option", "variable"])
def test_a_blank_restart_on_is_refused_not_read_as_any(how: str) -> None:
    """Spaces name no exit code: they were read as ``any`` (a restart on every code)."""
    args = ["--framework", "torch_ddp", "--topology", "local", "--max-restarts", "2"]
    env = clean_env({"MALAUNCH_RESTART_ON": " "} if how == "variable" else {})
    if how == "option":
        args += ["--restart-on", " "]
    result = run_cli([*args, "--dry-run", "--", "true"], env=env)
    shown = "--restart-on" if how == "option" else "MALAUNCH_RESTART_ON"
    assert (result.code, result.stdout) == (64, "")
    assert result.stderr == (
        f"malaunch: error: {shown} ' ': expected any, or exit codes like 1,70-79,SIGKILL (got '')\n"
    )


@pytest.mark.parametrize("option", ["--console-prefix", "--job-secret"])
def test_an_empty_value_that_means_something_is_taken(option: str) -> None:
    """No prefix; no secret (the default)."""
    args = [
        "--framework",
        "torch_ddp",
        "--topology",
        "local",
        option,
        "",
        "--dry-run",
        "--",
        "true",
    ]
    result = run_cli(args)
    assert result.code == 0, result.stderr


def test_an_empty_variable_counts_as_unset() -> None:
    result = run_cli(DRY, env=clean_env({"MALAUNCH_RESTART_ON": "", "MALAUNCH_CONDA_ENV": ""}))
    assert result.code == 0, result.stderr


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["report", "{long}", "--html", "r.html"], "[DIR]"),
        (["logs", "{long}"], "[DIR]..."),
        (["--framework", "torch_ddp", "--path-mapping", "{long}", "--dry-run", "--", "true"],
         "--path-mapping"),
        (["ranktable", "generate", "out.json", "--hccn-conf", "{long}"], "--hccn-conf"),
    ],
)  # fmt: skip
def test_a_path_no_system_call_takes_is_refused_as_click_parses(
    args: list[str], culprit: str, tmp_path: Path
) -> None:
    """``report`` ended with exit 70 (``OSError: File name too long``) on a 5,000-digit DIR."""
    long = str(tmp_path / ("9" * 5000))
    result = run_cli([arg.replace("{long}", long) for arg in args], cwd=tmp_path)
    assert (result.code, result.stdout) == (64, "")
    shown = f"{long[:100]}... ({len(long)} characters)"
    assert result.stderr == f"malaunch: error: {culprit}: {shown}: File name too long\n"


@pytest.mark.parametrize(
    ("args", "variable"),
    [
        (["plugins"], "MALAUNCH_PLUGINS_JSON"),
        (["topology"], "MALAUNCH_TOPOLOGY_JSON"),
        (["logs", "."], "MALAUNCH_LOGS_FOLLOW"),
    ],
)
def test_a_tool_command_s_twins_are_named_after_the_option(args: list[str], variable: str) -> None:
    """They were named after the code's parameter (MALAUNCH_PLUGINS_AS_JSON,
    MALAUNCH_LOGS_FOLLOWING, MALAUNCH_REPORT_OUT, MALAUNCH_TOPOLOGY_SOURCE)."""
    result = run_cli(args, env=clean_env({variable: "maybe"}))
    assert result.code == 64
    assert result.stderr.startswith(f"malaunch: error: {variable}: 'maybe' is not a valid boolean")


def test_report_html_twin(tmp_path: Path) -> None:
    result = run_cli(["report", str(tmp_path)], env=clean_env({"MALAUNCH_REPORT_HTML": ""}))
    assert (
        result.stderr == "malaunch: error: --html OUT is required: the file to write the page to\n"
    )
    result = run_cli(["report", str(tmp_path)], env=clean_env({"MALAUNCH_REPORT_HTML": "r.html"}))
    assert result.code == 66, result.stderr  # past the option: no run in the directory


def test_render_refuses_a_framework_that_is_not_installed() -> None:
    """It rendered pods whose launcher would exit 78, or blamed --name for the job name it
    derived from the framework (``malaunch-1.5``)."""
    args = ["render", "volcano", "--nodes", "1", "--framework", "1.5", "--image", "i:1", "--", "t"]
    result = run_cli(args)
    assert (result.code, result.stdout) == (78, "")
    assert result.stderr.startswith(
        "malaunch: error: --framework: unknown framework '1.5' (installed: "
    )


def test_a_conda_env_name_the_system_refuses_is_one_line(tmp_path: Path) -> None:
    """A 5,000-character name was exit 70 (OSError: File name too long) from the option and
    from the image's DEFAULT_CONDA_ENV_NAME alike."""
    name = "9" * 5000
    result = run_cli([*DRY[:-1], "python", "x.py"], env=clean_env({"DEFAULT_CONDA_ENV_NAME": name}))
    assert (result.code, result.stdout) == (66, "")
    assert result.stderr == (
        f"malaunch: error: conda env '{'9' * 60}... (5000 characters)' (from "
        "DEFAULT_CONDA_ENV_NAME): File name too long\n"
    )
    result = run_cli(["--conda-env", name, *DRY[:-1], "python", "x.py"])
    assert (result.code, result.stdout) == (64, "")
    assert result.stderr == (
        f"malaunch: error: --conda-env: {'9' * 100}... (5000 characters): File name too long\n"
    )


def test_a_platform_dir_that_cannot_be_made_is_64(tmp_path: Path) -> None:
    """It was exit 70 (NotADirectoryError) for a path through a file."""
    (tmp_path / "file").write_text("x")
    below = tmp_path / "file" / "below"
    args = ["simulate", "--nodes", "1", "--platform", "octopus", "--framework", "torch_ddp",
            "--print-env", "--", "true"]  # fmt: skip
    result = run_cli(args, env=clean_env({"MALAUNCH_PLATFORM_DIR": str(below)}), cwd=tmp_path)
    assert (result.code, result.stdout) == (64, "")
    assert result.stderr == (
        f"malaunch: error: MALAUNCH_PLATFORM_DIR {below}: cannot create the directory: Not a "
        "directory\n"
    )
