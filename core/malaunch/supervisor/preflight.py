"""Checks before anything starts: a taken master port or job port fails now, with a clear
message, instead of as a rendezvous timeout in every rank minutes later; and the open-files
limit is raised, or the node's processes refused when they cannot fit under it, instead of
"Too many open files" halfway through starting them.

The launcher holds two descriptors for every process it runs (the output pipe and the log
file), so the common soft limit of 1,024 (``ulimit -n``) stops it near 500 ranks. It raises its
own soft limit to the hard one (``ulimit -Hn``), which an unprivileged process may do. The
processes it starts get the original soft limit back: they see the platform's limit, as under
torchrun or a shell, and a program that loops over every possible descriptor (or uses
``select()``) is not surprised by a million of them.
"""

from __future__ import annotations

import contextlib
import os
import resource
from typing import Optional, Tuple

from malaunch.errors import LaunchError
from malaunch.models import LaunchPlan, Topology
from malaunch.net import taken_anywhere
from malaunch.wording import plural

# Descriptors of the launcher besides those of its processes: the event loop, the signal and
# reaper pipes, the heartbeat and job channel sockets, the run manifest, a stage-in's
# connections, the few a spawn holds for a moment.
LAUNCHER_FILES = 64
# Held for each process while it runs: its output pipe and its log file; one more while its
# stack is captured on a hang (py-spy's output pipe).
FILES_PER_PROCESS = 2
FILES_PER_CAPTURE = 1
# Linux's own ceiling for RLIMIT_NOFILE when the hard limit is "unlimited".
NR_OPEN = "/proc/sys/fs/nr_open"

# (soft, hard) as the launcher found them, before raise_open_files_limit(); None until then.
_found: Optional[Tuple[int, int]] = None


def check_job_port(topology: Topology, job_port: Optional[int]) -> None:
    """On node 0, before it listens on the job port: LaunchError (71) if that port is the
    master port too, or already taken. Other nodes have nothing to check."""
    if topology.node_rank != 0 or job_port is None:
        return
    if job_port == topology.master_port:
        msg = f"the job port and the master port are both {job_port}: give --job-port another one"
        raise LaunchError(msg)
    what, option = f"job port {job_port}", "--job-port or MALAUNCH_JOB_PORT"
    _check(job_port, what, option, topology.master_addr)


def check_ports(plan: LaunchPlan, job_port: Optional[int] = None) -> None:
    """On node 0, fail with LaunchError (71) if the master port or the job channel's port is
    already taken (or both are the same port). Other nodes have nothing to check. A launch
    checks the job port before it listens there (:func:`check_job_port`), this one after."""
    topology = plan.topology
    if topology.node_rank != 0:
        return
    check_job_port(topology, job_port)
    port = topology.master_port
    if port is not None:
        _check(
            port,
            f"master port {port}",
            "--master-port or MALAUNCH_MASTER_PORT",
            topology.master_addr,
        )


def _check(port: int, what: str, option: str, master: str) -> None:
    if taken_anywhere(port):
        msg = (
            f"{what} is already in use on this host (the master node, {master}); "
            f"pick another with {option}, or stop the process listening on it"
        )
        raise LaunchError(msg)


def raise_open_files_limit() -> Tuple[int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit; return (soft, hard) as
    they are now. The limits found first are kept for :func:`limits_for_children`."""
    global _found  # noqa: PLW0603 (the limit is the process's own state; so is this record)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if _found is None:
        _found = (soft, hard)
    target = hard
    if hard == resource.RLIM_INFINITY:
        # Linux refuses "unlimited" for this limit; its real ceiling is fs.nr_open.
        try:
            with open(NR_OPEN, "rb") as handle:
                target = int(handle.read().strip() or b"0")
        except (OSError, ValueError):
            return soft, hard
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def limits_for_children() -> Optional[Tuple[int, int]]:
    """The ``RLIMIT_NOFILE`` the launcher's processes get: the one it found, or None when it
    never raised its own (nothing to give back)."""
    return _found


def restore_limits_in_child(limits: Optional[Tuple[int, int]]) -> None:
    """In a child between fork and exec: set ``limits`` (from :func:`limits_for_children`)."""
    if limits is not None:
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def open_files_needed(processes: int, peers: int = 0, hang: bool = False) -> int:
    """Descriptors the launcher needs at most to run ``processes`` processes, with ``peers``
    other node launchers connected to it (node 0) and hang detection on or off."""
    per_process = FILES_PER_PROCESS + (FILES_PER_CAPTURE if hang else 0)
    return _open_now() + LAUNCHER_FILES + peers + per_process * processes


def _open_now() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: the three standard streams and what the CLI opened
        return 16


def check_open_files(processes: int, peers: int = 0, hang: bool = False) -> None:
    """Raise the soft limit, then fail with LaunchError (71) before anything starts when this
    node's processes still cannot fit under it, naming the limit and the number needed."""
    soft, hard = raise_open_files_limit()
    needed = open_files_needed(processes, peers, hang)
    if soft == resource.RLIM_INFINITY or needed <= soft:
        return
    shown = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    what = plural(processes, "process")
    if peers:  # node 0: the job channel holds a connection to every other node
        what += f" and the job channel's {plural(peers, 'connection')} (other nodes, strangers)"
    need = "needs" if processes == 1 and not peers else "need"  # one process, or several things
    msg = (
        f"{what} {need} about {needed} open files in the launcher, but "
        f"RLIMIT_NOFILE allows {soft} (hard limit {shown}; `ulimit -n`, `ulimit -Hn`): raise "
        "the nofile limit of the container or host, or start fewer processes on this node"
    )
    raise LaunchError(msg)
