"""The second example plugin (examples/malaunch-paddle), installed with pip: a framework that
declares its own launcher's variables and checks a range of ports against the job port.

CI installs it into the test virtualenv (scripts/test.sh, .ci/run); these tests fail, not
skip, when it is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Dict

import pytest

from malaunch.testing import CliResult, clean_env, run_cli

EXAMPLE = Path(__file__).parents[2] / "examples" / "malaunch-paddle"
DIST = "malaunch-paddle"

# Keeps the PADDLE_* variables it was started with, then exits.
TRAINER = """\
import json, os, pathlib, sys
seen = {k: v for k, v in os.environ.items() if k.startswith(("PADDLE_", "FLAGS_"))}
out = pathlib.Path(sys.argv[1]) / f"trainer{os.environ['PADDLE_TRAINER_ID']}.json"
out.write_text(json.dumps(seen))
"""


@pytest.fixture(scope="module", autouse=True)
def _installed() -> None:
    try:
        metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        pytest.fail(
            f"{DIST} is not installed; run: {sys.executable} -m pip install {EXAMPLE}",
            pytrace=False,
        )


def test_listed_as_a_framework_of_its_distribution() -> None:
    rows = {row["name"]: row for row in json.loads(run_cli(["plugins", "--json"]).stdout)}
    paddle = rows["paddle"]
    assert (paddle["kind"], paddle["distribution"], paddle["plugin"]) == (
        "framework", DIST, "paddle",
    )  # fmt: skip


def test_its_own_tests_pass_with_the_author_kit() -> None:
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
    assert "7 passed" in proc.stdout


def _simulate(tmp_path: Path, *options: str) -> CliResult:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER, encoding="utf-8")
    (tmp_path / "out").mkdir()
    args = ["simulate", "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano"]
    args += ["--framework", "paddle", *options, "--log-dir", str(tmp_path / "logs")]
    command = [sys.executable, str(script), str(tmp_path / "out")]
    return run_cli([*args, "--", *command])


def test_two_nodes_of_trainers_on_loopback(tmp_path: Path) -> None:
    result = _simulate(tmp_path, "--paddle-start-port", "7100")
    assert result.code == 0, result.stderr
    seen: Dict[int, Dict[str, str]] = {
        int(path.stem[len("trainer") :]): json.loads(path.read_text(encoding="utf-8"))
        for path in (tmp_path / "out").glob("trainer*.json")
    }
    # Simulated nodes are 127.0.0.1 and 127.0.0.2; each node's trainers count from 7100.
    endpoints = ["127.0.0.1:7100", "127.0.0.1:7101", "127.0.0.2:7100", "127.0.0.2:7101"]
    assert seen == {
        rank: {
            "PADDLE_TRAINER_ID": str(rank),
            "PADDLE_TRAINERS_NUM": "4",
            "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints),
            "PADDLE_CURRENT_ENDPOINT": endpoints[rank],
            "PADDLE_RANK_IN_NODE": str(rank % 2),
            "FLAGS_selected_gpus": str(rank % 2),
        }
        for rank in range(4)
    }


def test_every_node_refuses_a_range_holding_the_job_port(tmp_path: Path) -> None:
    result = _simulate(tmp_path, "--job-port", "6171")
    assert result.code == 64
    said = (
        "malaunch: error: --paddle-start-port 6170: the trainers of node 0 would listen on "
        "ports 6170-6171, which hold the job port 6171 (node 0's launcher serves the job "
        "channel there); give --paddle-start-port 6172, or a --job-port outside 6170-6171"
    )
    lines = result.stdout.splitlines()
    assert f"[node 0] {said}" in lines
    assert f"[node 1] {said}" in lines
    assert list((tmp_path / "out").iterdir()) == []  # no trainer started
