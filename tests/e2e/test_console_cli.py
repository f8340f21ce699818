"""Console options through the installed command: --console-prefix and --console-dedup."""

from __future__ import annotations

import sys
from pathlib import Path

from malaunch.testing import run_cli

SCRIPT = (
    "import os, time\n"
    "print('epoch 1 done', flush=True)\n"
    "print('rank', os.environ['RANK'], flush=True)\n"
)


def launch(tmp_path: Path, *options: str) -> str:
    args = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "4"]
    args += ["--log-dir", str(tmp_path / "logs"), *options, "--", sys.executable, "-c", SCRIPT]
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    return result.stdout


def test_dedup_folds_the_console_and_keeps_every_log_line(tmp_path: Path) -> None:
    out = launch(tmp_path, "--console-dedup").splitlines()
    assert out.count("[ranks 0-3] epoch 1 done") == 1
    assert sorted(line for line in out if "] rank " in line) == [
        f"[rank {r}] rank {r}" for r in range(4)
    ]
    for rank in range(4):
        log = (tmp_path / "logs" / f"worker-{rank}.log").read_text()
        assert log == f"epoch 1 done\nrank {rank}\n"


def test_prefix_template_carries_node_host_rank_and_role(tmp_path: Path) -> None:
    out = launch(tmp_path, "--console-prefix", "<{node}|{host}|{rank}|{local_rank}|{role}> ")
    for rank in range(4):
        assert f"<0|127.0.0.1|{rank}|{rank}|worker> epoch 1 done" in out


def test_an_unknown_prefix_field_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli(
        ["--framework", "torch_ddp", "--console-prefix", "[{gpu}] ", "--", "true"], cwd=tmp_path
    )
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: --console-prefix '[{gpu}] ': unknown field {gpu} "
        "(known: {node}, {host}, {rank}, {local_rank}, {role})\n"
    )
