"""``malaunch simulate --print-env`` sourced by a real shell, with hostile values everywhere:
every value arrives exactly, nothing in one runs, and the printed launcher command, run as
printed, gives the worker exactly its arguments and ``--env`` values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from malaunch.testing import clean_env, run_cli

WORKER = """\
import json, os, pathlib, sys
out = pathlib.Path(sys.argv[1])
names = ("INJECT", "LINES", "QUOTES", "EMOJI", "FORGED")
seen = {"argv": sys.argv[2:], "env": {name: os.environ.get(name) for name in names}}
(out / ("rank-" + os.environ["RANK"] + ".json")).write_text(json.dumps(seen))
"""
ENV = {
    "INJECT": "$(touch canary); `touch canary`; touch canary",
    "LINES": "a\nFORGED=1",
    "QUOTES": "it's \"q\" \\ $HOME '",
    "EMOJI": "\U0001f600 é",
}
# A launcher option set as its variable, whose value is free text: printed for each node.
PAYLOAD = "\n touch canary #'; touch canary\x1b]0;title\x07"
ARGUMENTS = ["arg with space", "$(touch canary)", "a\nb; touch canary", "", "'\"\\"]


def print_env(tmp_path: Path) -> str:
    platform_dir = tmp_path / "platform dir $(touch canary)"
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER, encoding="utf-8")
    (tmp_path / "out").mkdir()
    env_options = [token for name, value in ENV.items() for token in ("--env", f"{name}={value}")]
    args = [
        "simulate", "--print-env", "--nodes", "1", "--platform", "octopus",
        "--framework", "torch_ddp", "--platform-dir", str(platform_dir),
        "--log-dir", str(tmp_path / "my logs"), "--console-ranks", "none", *env_options,
        "--", sys.executable, str(worker), str(tmp_path / "out"), *ARGUMENTS,
    ]  # fmt: skip
    result = run_cli(args, env=clean_env({"MALAUNCH_JOB_SECRET": PAYLOAD}), cwd=tmp_path)
    assert (result.code, result.stderr) == (0, ""), result.stderr
    return result.stdout


def sourced(tmp_path: Path, text: str, then: str) -> subprocess.CompletedProcess[bytes]:
    script = tmp_path / "printed.sh"
    script.write_bytes(os.fsencode(text + "\n"))
    return subprocess.run(
        ["bash", "-c", f'set -a; . "$1"; {then}', "sh", str(script)],
        env=clean_env(), cwd=tmp_path, capture_output=True, timeout=120, check=False,
    )  # fmt: skip


def launcher_line(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith("# launcher: ")]
    return line[len("# launcher: ") :]


def test_sourced_output_exports_exact_values_and_runs_nothing(tmp_path: Path) -> None:
    printed = print_env(tmp_path)
    result = sourced(tmp_path, printed, "exec env -0")
    assert result.returncode == 0, result.stderr
    entries = [entry.partition(b"=") for entry in result.stdout.split(b"\0") if entry]
    env: Dict[bytes, bytes] = {name: value for name, _, value in entries}
    assert env[b"MALAUNCH_JOB_SECRET"] == os.fsencode(PAYLOAD)
    assert env[b"MA_LOG_DIR"] == os.fsencode(str(tmp_path / "my logs" / "node-0"))
    assert os.fsdecode(env[b"DATASET"]).startswith(str(tmp_path / "platform dir $(touch canary)"))
    assert b"FORGED" not in env
    assert not (tmp_path / "canary").exists()
    assert "\x1b" not in printed  # a control character is escaped, never printed raw


def test_the_launcher_command_runs_as_printed(tmp_path: Path) -> None:
    printed = print_env(tmp_path)
    result = sourced(tmp_path, printed, f"set +a; {launcher_line(printed)}")
    assert result.returncode == 0, result.stderr + result.stdout
    seen = json.loads((tmp_path / "out" / "rank-0.json").read_text(encoding="utf-8"))
    assert seen["argv"] == ARGUMENTS
    expected: Dict[str, object] = {**ENV, "FORGED": None}
    assert seen["env"] == expected
    assert not (tmp_path / "canary").exists()


def test_a_variable_name_no_shell_can_assign_is_65(tmp_path: Path) -> None:
    args: List[str] = ["simulate", "--print-env", "--nodes", "1", "--platform", "volcano",
                       "--framework", "torch_ddp", "--", "python", "train.py"]  # fmt: skip
    result = run_cli(args, env=clean_env({"MALAUNCH_A-B": "1"}), cwd=tmp_path)
    assert (result.code, result.stdout) == (65, "")
    # The launcher's warning that the variable matches no option comes first.
    assert result.stderr.splitlines()[-1] == (
        "malaunch: error: simulate --print-env: the environment variable 'MALAUNCH_A-B' is not "
        "a shell variable name (ASCII letters, digits and '_', no digit first); unset it first"
    )
    assert [line for line in result.stderr.splitlines() if "error" in line] == [
        result.stderr.splitlines()[-1]
    ]
