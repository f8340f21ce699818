"""A restart whose stop and start reach a node in one read (--restart-backoff 0).

Node 1's rank fails; node 1 stops its attempt and reports it ended before node 0 has answered
(node 0's launcher is frozen meanwhile). Node 0 then sends the stop (restart 1 of 1) and, with
no back-off, the next start right after it. Node 1's launcher is frozen too until both are
there, so that it reads them together: it used to drop the start (its attempt was over but
not yet put away) and wait for it forever, while node 0 ran attempt 1 alone.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Callable

from launchers import Launchers, printed_nodes

# Rank 1 (node 1) fails in attempt 0 once told to; every other rank of attempt 0 waits to be
# stopped; in attempt 1 every rank writes its mark and succeeds.
WORKER = """\
import os, pathlib, sys, time
out, rank = pathlib.Path(sys.argv[1]), os.environ["RANK"]
attempt = os.environ["MALAUNCH_RESTART_COUNT"]
(out / ("started-%s-%s" % (rank, attempt))).touch()
if attempt == "0":
    while rank == "1" and not (out / "fail").exists():
        time.sleep(0.02)
    if rank == "1":
        sys.exit(3)
    time.sleep(120)
"""


def wait_for(condition: Callable[[], bool], what: str, launchers: Launchers) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"{what}: {launchers.output()}"
        time.sleep(0.02)


def test_a_stop_and_the_next_start_read_together_start_the_next_attempt(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    args = [
        "--nodes", "2", "--nproc-per-node", "1", "--platform", "volcano",
        "--framework", "torch_ddp", "--max-restarts", "1", "--restart-backoff", "0",
        "--heartbeat-timeout", "120", "--log-dir", str(tmp_path / "logs"),
        "--platform-dir", str(tmp_path / "platform"),
        "--", sys.executable, str(script), str(out),
    ]  # fmt: skip
    nodes = printed_nodes(args, cwd=tmp_path)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for(lambda: len(list(out.glob("started-*-0"))) == 2, "attempt 0", launchers)
        node_0, node_1 = launchers.procs[0], launchers.procs[1]
        node_0.send_signal(signal.SIGSTOP)
        (out / "fail").touch()
        # Node 1 says so once its rank has failed; it reports the failure and that its group
        # is down in that same round, to a frozen node 0.
        wait_for(lambda: "exited with code 3" in launchers.output(1), "rank 1 failing", launchers)
        time.sleep(0.5)  # the round that reports goes on after the line
        node_1.send_signal(signal.SIGSTOP)
        node_0.send_signal(signal.SIGCONT)
        # Node 0 stops its rank, then sends the stop and the start; node 1 reads neither yet.
        wait_for((out / "started-0-1").exists, "node 0's attempt 1", launchers)
        node_1.send_signal(signal.SIGCONT)
        codes = launchers.wait(timeout=60)
    assert codes == {0: 0, 1: 0}, launchers.output()
    assert (out / "started-1-1").exists()
