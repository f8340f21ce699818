"""The open-files refusal before anything starts (malaunch.supervisor.preflight), worded by
malaunch.wording: node 0 of a large job with one process of its own said "1 processes"."""

from __future__ import annotations

import subprocess
import sys

import pytest

# In a child: the hard limit lowered there cannot be raised again in the test's own process.
CHILD = """\
import resource, sys
from malaunch.errors import LaunchError
from malaunch.supervisor.preflight import check_open_files
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
try:
    check_open_files(int(sys.argv[1]), peers=int(sys.argv[2]))
except LaunchError as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    ("processes", "peers", "what"),
    [
        (1, 500, "1 process and the job channel's 500 connections (other nodes, strangers)"),
        (40, 0, "40 processes"),
    ],
)
def test_the_refusal_counts_its_processes_in_words(processes: int, peers: int, what: str) -> None:
    said = subprocess.run(
        [sys.executable, "-c", CHILD, str(processes), str(peers)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert said.startswith(f"{what} need about "), said
    assert said.endswith(" open files in the launcher, but RLIMIT_NOFILE allows 64 (hard limit 64; "
                         "`ulimit -n`, `ulimit -Hn`): raise the nofile limit of the container or "
                         "host, or start fewer processes on this node\n")  # fmt: skip
