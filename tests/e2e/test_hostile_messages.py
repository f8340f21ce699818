"""Log flooding and line injection (issue 13): what the launcher prints about hostile values.

A value from the environment or a file may hold a newline or a terminal escape; each launcher
message stays one line with such characters escaped. A warning repeated for many values (data
paths missing here) names the first three and counts the rest, so 5,000 ``DATASET_MAP``
entries are four lines, not 5,000. Runs the installed ``malaunch`` (``topology --json`` reads
the data variables and warns as a launch does).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Dict

import pytest

from malaunch.testing import CliResult, clean_env, run_cli, run_dir

TIMEOUT = 30.0
WARN = "malaunch: warning: data path does not exist here: "


def topology(env: Dict[str, str]) -> CliResult:
    result = run_cli(["topology", "--json", "--topology", "local"], env=clean_env(env))
    assert result.code == 0, result.stderr[:2000]
    assert "Traceback" not in result.stderr
    return result


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("/x\n/y", r"'/x\n/y'"),
        ("/x\r/y", r"'/x\r/y'"),
        ("/data\x1b[2J", r"'/data\x1b[2J'"),
        ("/data/\u202egnp.exe", r"'/data/\u202egnp.exe'"),  # a right-to-left override
    ],
)
def test_a_control_character_in_a_data_path_is_escaped(value: str, shown: str) -> None:
    result = topology({"RESULT": value})
    assert result.stderr == f"{WARN}{shown}\n"


def test_a_printable_path_is_shown_as_it_is() -> None:
    result = topology({"RESULT": "/nowhere/résultats 2"})
    assert result.stderr == f"{WARN}/nowhere/résultats 2\n"


def test_five_thousand_missing_datasets_are_four_lines() -> None:
    # Short paths: one variable holds at most 128 KiB on Linux (MAX_ARG_STRLEN).
    datasets = {f"d{number}": f"/n/{number}" for number in range(5000)}
    result = topology({"DATASET_MAP": json.dumps(datasets), "RESULT": "/n/result"})
    assert result.stderr.splitlines() == [
        f"{WARN}/n/0",
        f"{WARN}/n/1",
        f"{WARN}/n/2",
        "malaunch: warning: ... and 4998 more data paths that do not exist here",
    ]


def test_three_missing_paths_are_all_named(tmp_path: Path) -> None:
    env = {"DATASET": "/n/a", "MODEL": "/n/b", "RESULT": "/n/c", "CACHED_DATASET": str(tmp_path)}
    assert topology(env).stderr.splitlines() == [f"{WARN}/n/a", f"{WARN}/n/b", f"{WARN}/n/c"]


def test_an_escape_sequence_in_an_error_line_is_escaped() -> None:
    result = run_cli(
        ["topology", "--json", "--topology", "local"],
        env=clean_env({"CUDA_VISIBLE_DEVICES": "0,\x1b[2J1"}),
    )
    assert (result.code, result.stdout) == (65, "")
    assert result.stderr == (
        r'malaunch: error: CUDA_VISIBLE_DEVICES="0,\x1b[2J1": item 2 "\x1b[2J1" is not a '
        "device id (expected ascending integers without spaces, e.g. 0,1,2,3)\n"
    )


def test_a_newline_in_a_path_is_escaped_in_warnings_and_the_error(tmp_path: Path) -> None:
    # Every launcher line goes through the escaping, also one whose value the caller did not
    # escape itself: here a log dir named "a<newline>b" whose files are both damaged.
    args = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "1"]
    run = tmp_path / "run"
    done = run_cli([*args, "--log-dir", str(run), "--", sys.executable, "-c", "pass"])
    assert done.code == 0, done.stderr
    odd = tmp_path / "a\nb"
    shutil.copytree(run_dir(run), odd)  # the run folder itself
    (odd / "malaunch-run.json").write_text("[" * 100_000)
    (odd / "malaunch-summary.json").write_text("{")
    result = run_cli(["report", "a\nb", "--html", "r.html"], cwd=tmp_path, timeout=TIMEOUT)
    assert result.code == 66
    assert result.stderr.splitlines() == [
        r"malaunch: warning: ignoring a\nb/malaunch-run.json: not JSON (nested too deeply to "
        "read)",
        r"malaunch: warning: ignoring a\nb/malaunch-summary.json: not JSON (Expecting property "
        "name enclosed in double quotes: line 1 column 2 (char 1))",
        r"malaunch: error: a\nb: no readable malaunch-run.json or malaunch-summary.json there "
        "or in a node-<k>/ below it; not the log dir of a malaunch run",
    ]
