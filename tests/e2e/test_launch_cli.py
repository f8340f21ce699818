"""The launch command's own behaviour around the supervisor: the master-port pre-flight,
the lazily imported logger and the console script's exit path."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from malaunch.testing import clean_env, run_cli


def test_busy_master_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli(
            [
                "--framework",
                "torch_ddp",
                "--topology",
                "local",
                "--master-port",
                str(port),
                "--log-dir",
                str(tmp_path / "logs"),
                "--",
                sys.executable,
                "-c",
                f"open({str(marker)!r}, 'w')",
            ]
        )
    assert result.code == 71, result.stderr
    assert f"port {port}" in result.stderr
    assert "--master-port" in result.stderr
    assert not marker.exists()  # refused before any worker ran
    assert "Traceback" not in result.stderr


def test_dry_run_does_not_import_loguru(tmp_path: Path) -> None:
    """loguru (asyncio, multiprocessing) is imported only when a message is printed."""
    script = (
        "import sys\n"
        "from malaunch.cli import main\n"
        "code = main.run(['--framework', 'torch_ddp', '--topology', 'local', '--dry-run',\n"
        "                '--log-dir', sys.argv[1], '--', 'python', 'train.py'])\n"
        "assert code == 0, code\n"
        "print('loguru' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_messages_still_reach_stderr_and_output_is_flushed(tmp_path: Path) -> None:
    """The console script leaves through os._exit: everything printed must be out by then."""
    code = "import os; print('x' * 70000); raise SystemExit(int(os.environ['RANK']) + 3)"
    options = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2"]
    logs = ["--log-dir", str(tmp_path / "logs")]
    result = run_cli([*options, *logs, "--", sys.executable, "-c", code])
    assert result.code in (3, 4)
    assert "malaunch: error: " in result.stderr  # the first failure, through the lazy logger
    assert "malaunch: info: summary: exit code" in result.stderr
    assert ("x" * 70000) in result.stdout


def test_missing_data_paths_are_a_warning_at_launch(tmp_path: Path) -> None:
    present = tmp_path / "train-set"
    present.mkdir()
    absent = tmp_path / "not-mounted"
    data_map = f'{{"train": "{present}", "eval": "{absent}"}}'
    env = clean_env({"DATASET_MAP": data_map})
    options = ["--framework", "torch_ddp", "--topology", "local", "--dry-run"]
    result = run_cli([*options, "--log-dir", str(tmp_path / "logs"), "--", "python", "t.py"], env)
    assert result.code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "data path" in line]
    assert warnings == [f"malaunch: warning: data path does not exist here: {absent}"]


def test_python_dash_m_malaunch_is_the_same_command(tmp_path: Path) -> None:
    """``python -m malaunch`` from the installed package: same plugins, same exit codes."""

    def module(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "malaunch", *args],
            env=clean_env(),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    listed = module("plugins")
    assert listed.returncode == 0
    assert listed.stdout == run_cli(["plugins"], cwd=tmp_path).stdout
    missing = module("--framework", "nope", "--", "true")
    assert missing.returncode == 78
    assert missing.stderr.startswith("malaunch: error: --framework: unknown framework 'nope'")
