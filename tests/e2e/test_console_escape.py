"""Terminal safety (SPEC §12): a rank's output cannot command the terminal it is shown on.

A rank prints what a dataset or a hostile library might: an OSC 52 clipboard write, a window
title, a cursor move, BEL, a C1 CSI (U+009B), colour, and a carriage return followed by a forged
``malaunch: error:`` line. On a pseudo-terminal console, and on a pipe, the console shows the
controls as text (colour kept) and the forged line behind the rank's prefix; ``--console-raw``
(and its twin) passes the bytes through; the log file holds them exactly. ``malaunch logs``
escapes the same way, ``--raw`` not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from consoles import PtyConsole, kill_group

from malaunch.testing import clean_env, malaunch_executable, run_cli, run_dir

PAYLOAD = (
    b"\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[31mred\x1b[0m \x1b[2A\x07\xc2\x9b1m\n"
    b"50%\rmalaunch: error: forged\n"
)
ESCAPED = [
    b"[rank 0] \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b]0;pwned\\x07"
    b"\x1b[31mred\x1b[0m \\x1b[2A\\x07\\x9b1m",
    b"[rank 0] 50%\r[rank 0] malaunch: error: forged",
]
LINES = PAYLOAD.split(b"\n")[:-1]  # not splitlines(): a carriage return ends no line here
RAW = [b"[rank 0] " + line for line in LINES]


def launch_args(tmp_path: Path, *options: str) -> List[str]:
    (tmp_path / "payload.bin").write_bytes(PAYLOAD)
    code = "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())"
    return ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "1",
            "--log-dir", str(tmp_path / "logs"), *options,
            "--", sys.executable, "-c", code, str(tmp_path / "payload.bin")]  # fmt: skip


def on_a_terminal(tmp_path: Path, *options: str, env: Optional[Dict[str, str]] = None) -> bytes:
    """What the launcher shows on a pseudo-terminal: the rank's lines."""
    console = PtyConsole(stall=0)
    proc = console.start([malaunch_executable(), *launch_args(tmp_path, *options)], tmp_path, env)
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        kill_group(proc)
    return console.output(timeout=30)


def run_bytes(args: List[str], tmp_path: Path) -> bytes:
    """The command's stdout as bytes (``run_cli`` reads text, turning ``\r`` into ``\n``)."""
    proc = subprocess.run([malaunch_executable(), *args], env=clean_env(), cwd=tmp_path,
                          capture_output=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def rank_lines(output: bytes) -> List[bytes]:
    return [line for line in output.split(b"\n") if line.startswith(b"[rank 0]")]


def test_a_terminal_shows_the_controls_as_text_and_the_log_keeps_the_bytes(
    tmp_path: Path,
) -> None:
    assert rank_lines(on_a_terminal(tmp_path)) == ESCAPED
    assert (run_dir(tmp_path / "logs") / "worker-0.log").read_bytes() == PAYLOAD


@pytest.mark.parametrize("how", ["--console-raw", "MALAUNCH_CONSOLE_RAW"])
def test_console_raw_passes_everything_through(tmp_path: Path, how: str) -> None:
    if how.startswith("--"):
        output = on_a_terminal(tmp_path, how)
    else:
        output = on_a_terminal(tmp_path, env=clean_env({how: "1"}))
    assert rank_lines(output) == RAW
    assert (run_dir(tmp_path / "logs") / "worker-0.log").read_bytes() == PAYLOAD


def test_a_pipe_gets_the_escaped_console_too(tmp_path: Path) -> None:
    """A pipe usually ends at a terminal (tee, kubectl logs, a log viewer): escaped as well."""
    assert rank_lines(run_bytes(launch_args(tmp_path), tmp_path)) == ESCAPED


def test_malaunch_logs_escapes_unless_raw(tmp_path: Path) -> None:
    assert run_cli(launch_args(tmp_path, "--console-ranks", "none"), cwd=tmp_path).code == 0
    prefix = b"[node 0 rank 0] "
    escaped = run_bytes(["logs", str(tmp_path / "logs")], tmp_path)
    assert escaped.split(b"\n")[:-1] == [line.replace(b"[rank 0] ", prefix) for line in ESCAPED]
    raw = run_bytes(["logs", "--raw", str(tmp_path / "logs")], tmp_path)
    assert raw.split(b"\n")[:-1] == [prefix + line for line in LINES]
