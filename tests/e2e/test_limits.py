"""Limits the launcher meets (issue 18, point 9): the open-files limit and ``--wait-timeout``.

The open-files tests lower ``RLIMIT_NOFILE`` in the launcher's own process (``preexec_fn``),
as a container's ``nofile`` ulimit would, and run the installed ``malaunch``. The wait tests
run a node whose peers never come, and a node 0 that accepts the connection but never
answers, and check that the launcher gives up (69) at ``--wait-timeout``, saying why. How soon
past the timeout it exits is a figure of ``benchmarks/bench_limits.py``, not asserted here (a
loaded machine would fail any bound).
"""

from __future__ import annotations

import re
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator, List, Mapping, Optional, Sequence, Tuple

import pytest

from malaunch.testing import clean_env, malaunch_executable, run_dir
from ports import Reservations

RANKS = 1000


def nofile(soft: int, hard: int) -> Callable[[], None]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return lower


def can_set_hard(hard: int) -> bool:
    """Whether this test process may give its children a hard limit of ``hard`` (root may
    raise it; anyone may lower it)."""
    current = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return current == resource.RLIM_INFINITY or current >= hard or _is_root()


def _is_root() -> bool:
    import os  # noqa: PLC0415 (only here)

    return os.geteuid() == 0


def launch(
    args: Sequence[str],
    cwd: Path,
    limits: Optional[Tuple[int, int]] = None,
    env: Optional[Mapping[str, str]] = None,
    timeout: float = 120.0,
) -> Tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [malaunch_executable(), *args],
        env=clean_env(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        preexec_fn=nofile(*limits) if limits else None,
    )
    return proc, time.monotonic() - started


def thousand_ranks(log_dir: Path) -> List[str]:
    """1,000 ranks; each prints the soft limit it got, rank 0's on the console."""
    return [
        "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", str(RANKS),
        "--log-dir", str(log_dir), "--console-ranks", "0",
        "--", "sh", "-c", "ulimit -n",
    ]  # fmt: skip


@pytest.mark.skipif(not can_set_hard(4096), reason="cannot set a hard nofile limit of 4096")
def test_1000_ranks_start_under_a_soft_limit_of_1024(tmp_path: Path) -> None:
    """The launcher raises its soft limit to the hard one; its processes get 1,024 back."""
    proc, _ = launch(thousand_ranks(tmp_path / "logs"), tmp_path, limits=(1024, 4096))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Too many open files" not in proc.stderr
    assert "[rank 0] 1024\n" in proc.stdout
    logs = sorted(run_dir(tmp_path / "logs").glob("worker-*.log"))
    assert len(logs) == RANKS
    assert {path.read_text() for path in logs} == {"1024\n"}


def test_too_low_a_hard_limit_is_refused_before_anything_starts(tmp_path: Path) -> None:
    proc, _ = launch(thousand_ranks(tmp_path / "logs"), tmp_path, limits=(1024, 1024))
    assert proc.returncode == 71
    assert proc.stdout == ""
    assert re.fullmatch(
        r"malaunch: error: 1000 processes need about (\d+) open files in the launcher, but "
        r"RLIMIT_NOFILE allows 1024 \(hard limit 1024; `ulimit -n`, `ulimit -Hn`\): raise the "
        r"nofile limit of the container or host, or start fewer processes on this node\n",
        proc.stderr,
    ), proc.stderr
    needed = int(re.findall(r"about (\d+)", proc.stderr)[0])
    assert 2000 < needed < 2200
    assert not (tmp_path / "logs").exists()  # no process, no log, no folder left


def test_a_launch_that_fits_keeps_the_limit_its_processes_see(tmp_path: Path) -> None:
    """Few processes under a low hard limit: they start, and see the limit they had."""
    args = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2",
            "--log-dir", str(tmp_path / "logs"), "--", "sh", "-c", "ulimit -n; ulimit -Hn",
    ]  # fmt: skip
    proc, _ = launch(args, tmp_path, limits=(256, 512))
    assert proc.returncode == 0, proc.stderr
    assert "[rank 0] 256\n[rank 0] 512\n" in proc.stdout


# --- --wait-timeout -------------------------------------------------------------------------

WAIT = 2.0


def two_nodes(node: int, port: int) -> dict[str, str]:
    return {
        "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2",
        "VC_TASK_INDEX": str(node),
        "MALAUNCH_JOB_PORT": str(port),
    }


@pytest.mark.parametrize("node", [0, 1])
def test_a_lone_node_gives_up_at_wait_timeout(
    tmp_path: Path, node: int, free_port: Reservations
) -> None:
    """Node 0 waits for node 1 (or node 1 for node 0), which never comes: exit 69 at the
    timeout. (Before a fix, a launcher ending with an error waited 2 s more for its reaper:
    bench_limits.py's rows show how long past the timeout it exits.)"""
    args = ["--framework", "torch_ddp", "--wait-timeout", str(WAIT),
            "--log-dir", str(tmp_path / "logs"), "--", "true"]  # fmt: skip
    proc, took = launch(args, tmp_path, env=two_nodes(node, free_port()))
    assert proc.returncode == 69, proc.stderr
    assert took >= WAIT, (took, proc.stderr)  # it did wait


def test_a_silent_node_0_does_not_stretch_wait_timeout(tmp_path: Path) -> None:
    """Node 0's port accepts connections but never says a word: node 1 gives up at its
    --wait-timeout, not after a whole handshake's read timeout (5 s) past it."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        port = int(server.getsockname()[1])
        args = ["--framework", "torch_ddp", "--wait-timeout", "1",
                "--log-dir", str(tmp_path / "logs"), "--", "true"]  # fmt: skip
        proc, _ = launch(args, tmp_path, env=two_nodes(1, port))
    assert proc.returncode == 69, proc.stderr
    assert "did not accept node 1 within 1s: timed out" in proc.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_wait_for_a_silent_node_0_at_once(tmp_path: Path, signum: int) -> None:
    """Node 0's port accepts connections but never says a word, and node 1 is told to stop:
    it ends then, not once the handshake's read has timed out (up to 5 s later)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        port = int(server.getsockname()[1])
        args = ["--framework", "torch_ddp", "--wait-timeout", "60",
                "--log-dir", str(tmp_path / "logs"), "--", "true"]  # fmt: skip
        proc = subprocess.Popen(
            [malaunch_executable(), *args], env=clean_env(two_nodes(1, port)), cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        conn, _ = server.accept()  # node 1 is in its handshake, waiting for the challenge
        proc.send_signal(signum)
        try:
            # A hang guard below the handshake's 5 s read timeout, which the bug waited out.
            _, err = proc.communicate(timeout=4)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("the signal did not end node 1's handshake with a silent node 0")
        finally:
            conn.close()
    assert proc.returncode == 128 + signum, err


HELD_ELSEWHERE = 9000  # a third of the ephemeral range, bound on another loopback address


@pytest.fixture()
def ports_held_on_another_address() -> Iterator[None]:
    """Sockets bound (not listening) to many ports of 127.0.0.2, as a service bound to one
    interface or client sockets bound to a source address hold them: free on 127.0.0.1,
    taken for a server that binds every interface."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HELD_ELSEWHERE + 200:
        pytest.skip(f"needs {HELD_ELSEWHERE + 200} open files (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, HELD_ELSEWHERE + 200), hard))
    held = []
    try:
        for _ in range(HELD_ELSEWHERE):
            sock = socket.socket()
            sock.bind(("127.0.0.2", 0))
            held.append(sock)
        yield
    finally:
        for sock in held:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_port_the_launcher_picks_is_one_it_accepts(
    tmp_path: Path, ports_held_on_another_address: None
) -> None:
    # The local source's master port was the kernel's pick for 127.0.0.1; the pre-flight
    # then found it held on another address and refused it (exit 71): the launcher failed
    # the job on a port of its own choosing, about one launch in three here.
    for attempt in range(6):
        proc, _ = launch(
            ["--framework", "torch_ddp", "--log-dir", "logs", "--", "python", "-c", "pass"],
            tmp_path,
        )
        assert proc.returncode == 0, (attempt, proc.stderr)
