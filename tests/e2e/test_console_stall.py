"""The event loop never blocks on output (SPEC §9): a console reader that stalls for 25 s.

Four runs start together (a module fixture; about 35 s in all; the module is one xdist group,
so that one test process runs them) and each test checks one:

- one node, its console a real pipe left unread for 25 s;
- one node, its console a pseudo-terminal paused with Ctrl-S (XOFF) for 25 s;
- two node launchers started by hand, node 1's console a pipe left unread for 25 s;
- two node launchers, node 0's console a pseudo-terminal under XOFF for 25 s.

The ranks (tests/workers/chatter.py) print 500 lines a second each for 31 s and exit 0, with
``--hang-timeout 5`` and the default heartbeat timeout (5 s). A launcher blocked in a console
write stops reading its ranks, its hang checks and its heartbeats: on one node a healthy rank
was declared hung (124), on two nodes the other node declared this one lost (75). The stall
lasts five times either timeout; the pipe or terminal is full within a second and the
launcher's buffer for a stalled reader (1 MiB) within about 10 s, so lines are dropped for the
rest of it. (It was 200 lines a second for 66 s, stalled for 60 s: the same, in 35 s less.)
Each run must end as an unstalled one does: every launcher and rank exits 0, every line is in
the log files, the console shows whole lines, and says how many it dropped once the reader is
back.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pytest
from consoles import Console, PipeConsole, PtyConsole, kill_group
from launchers import printed_nodes

from malaunch.testing import clean_env, malaunch_executable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.xdist_group("console_stall"),
]

CHATTER = Path(__file__).parents[1] / "workers" / "chatter.py"
STALL = 25.0
RUN = ["31", "500"]  # seconds, lines per second per rank
OPTIONS = ["--nproc-per-node", "2", "--hang-timeout", "5"]
RELAYED = re.compile(rb"\[rank (\d+)\] rank \1 (?:line \d+ \.+|done after \d+ lines)")
NOTE = re.compile(rb"malaunch: warning: (\d+) console lines? dropped: the console's reader did "
                  rb"not keep up; the log files in .+ hold them")  # fmt: skip
SUMMARY = re.compile(
    rb"malaunch: warning: (\d+) console lines? dropped during the run \(the console's reader "
    rb"did not keep up\); the log files in .+ hold every line"
)


@dataclasses.dataclass
class Run:
    """The launchers of one scenario; ``stalled`` is the node whose console stalls."""

    logs: Path
    procs: Dict[int, subprocess.Popen[bytes]]
    consoles: Dict[int, Optional[Console]]
    stalled: int
    outputs: Dict[int, bytes] = dataclasses.field(default_factory=dict)

    def finish(self) -> Dict[int, int]:
        codes = {node: proc.wait(timeout=200) for node, proc in self.procs.items()}
        for node, console in self.consoles.items():
            if console is not None:
                self.outputs[node] = console.output(timeout=30)
        return codes


def one_node(tmp_path: Path, console: Console) -> Run:
    args = [malaunch_executable(), "--framework", "torch_ddp", "--topology", "local", *OPTIONS,
            "--log-dir", str(tmp_path / "logs"),
            "--", sys.executable, str(CHATTER), *RUN]  # fmt: skip
    return Run(tmp_path / "logs", {0: console.start(args, tmp_path)}, {0: console}, 0)


def two_nodes(tmp_path: Path, stalled: int, console: Console) -> Run:
    args = ["--nodes", "2", "--platform", "volcano", "--framework", "torch_ddp", *OPTIONS,
            "--log-dir", str(tmp_path / "logs"), "--platform-dir", str(tmp_path / "platform"),
            "--", sys.executable, str(CHATTER), *RUN]  # fmt: skip
    run = Run(tmp_path / "logs", {}, {}, stalled)
    for node in printed_nodes(args, cwd=tmp_path):
        env = clean_env(node.env)
        if node.index == stalled:
            run.procs[node.index] = console.start(node.argv, tmp_path, env)
            run.consoles[node.index] = console
            continue
        with open(tmp_path / f"console-{node.index}.out", "wb") as out:
            run.procs[node.index] = subprocess.Popen(
                node.argv, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        run.consoles[node.index] = None
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Run]]:
    def folder(name: str) -> Path:
        return tmp_path_factory.mktemp(name)

    started: Dict[str, Run] = {}
    try:
        started["pipe-1"] = one_node(folder("pipe1"), PipeConsole(STALL))
        started["pty-1"] = one_node(folder("pty1"), PtyConsole(STALL))
        started["pipe-2"] = two_nodes(folder("pipe2"), 1, PipeConsole(STALL))
        started["pty-2"] = two_nodes(folder("pty2"), 0, PtyConsole(STALL))
        yield started
    finally:
        for run in started.values():
            for proc in run.procs.values():
                kill_group(proc)


def rank_logs(logs: Path) -> Dict[int, List[bytes]]:
    """Every rank's log lines, by rank, wherever the run folder put them."""
    found = {int(p.stem.split("-")[1]): p.read_bytes().splitlines() for p in
             logs.rglob("worker-*.log")}  # fmt: skip
    assert found, f"no rank logs under {logs}"
    return found


def summaries(logs: Path) -> List[Dict[str, Any]]:
    return [json.loads(p.read_text()) for p in logs.rglob("malaunch-summary.json")]


def check(run: Run, ranks: Sequence[int]) -> None:
    codes = run.finish()
    output = run.outputs[run.stalled]
    assert codes == dict.fromkeys(run.procs, 0), output[-3000:]
    for summary in summaries(run.logs):
        assert summary["exit_code"] == 0 and summary["hang"] is None
        assert all(p["exit_code"] == 0 for p in summary["processes"])
    # The log files hold every line each rank printed, in order.
    logs = rank_logs(run.logs)
    total = 0
    for rank in ranks:
        *lines, last = logs[rank]
        count = int(last.split()[-2])
        assert last == b"rank %d done after %d lines" % (rank, count)
        assert [line.split()[3] for line in lines] == [b"%d" % i for i in range(count)]
        total += count + 1
    # The console: whole lines only, each rank's with its prefix, the rest the launcher's.
    lines = output.splitlines()
    shown = [line for line in lines if RELAYED.fullmatch(line)]
    assert all(line in shown or line.startswith(b"malaunch: ") for line in lines)
    notes = [int(m[1]) for m in map(NOTE.fullmatch, lines) if m]
    said = [int(m[1]) for m in map(SUMMARY.fullmatch, lines) if m]
    # Lines were dropped, said once the reader was back, and in the summary; all add up.
    assert notes and said == [sum(notes)], [line for line in lines if b"dropped" in line]
    assert len(shown) + sum(notes) == total
    assert lines.index(next(line for line in lines if NOTE.fullmatch(line))) < len(lines) - 10


def test_one_node_with_a_stalled_pipe_ends_as_an_unstalled_run(runs: Dict[str, Run]) -> None:
    check(runs["pipe-1"], [0, 1])


def test_one_node_on_a_terminal_under_xoff_ends_as_an_unstalled_run(
    runs: Dict[str, Run],
) -> None:
    check(runs["pty-1"], [0, 1])


def test_two_nodes_with_node_1s_pipe_stalled_end_as_an_unstalled_run(
    runs: Dict[str, Run],
) -> None:
    check(runs["pipe-2"], [2, 3])


def test_two_nodes_with_node_0s_terminal_under_xoff_end_as_an_unstalled_run(
    runs: Dict[str, Run],
) -> None:
    check(runs["pty-2"], [0, 1])
