"""Keeping every descendant of the job within reach, even one that left its process group.

Each process starts in a session of its own and the launcher signals whole process groups, so a
worker's children die with it. A grandchild that calls ``setsid`` escapes that. Two settings
catch it, and ``docs/job.md`` says what each guarantees:

- **Child subreaper** (``PR_SET_CHILD_SUBREAPER``, Linux 3.4+, always on): an orphaned
  descendant is re-parented to the launcher instead of init. Once every process of an attempt
  has exited, whatever is still a child of the launcher and not one of its own processes
  escaped: it is SIGKILLed (with its group) and reaped. This covers the launcher's own stop
  (SIGTERM, failure, success), not a SIGKILL of the launcher itself, after which the orphans
  go to init.
- **A cgroup of its own** (cgroup v2, where a writable hierarchy is mounted): every process
  joins ``<our cgroup>/malaunch-<pid>-<random>`` before it executes, and nothing escapes a
  cgroup. At the end the launcher writes ``cgroup.kill``; the reaper does the same if the
  launcher dies, so even a SIGKILLed launcher leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Iterable, List, Optional, Set

from malaunch.log import logger
from malaunch.wording import plural

PR_SET_CHILD_SUBREAPER = 36
EMPTY_WAIT = 2.0  # seconds for a killed cgroup to empty before it is removed


class Containment:
    """The subreaper setting and the job's cgroup (``cgroup`` None where there is none)."""

    def __init__(self, cgroup: Optional[Path] = None, subreaper: bool = False) -> None:
        self.cgroup = cgroup
        self.subreaper = subreaper

    @classmethod
    def start(cls) -> Containment:
        """Become a subreaper and make a cgroup, each where the system allows it."""
        return cls(_make_cgroup(), _set_subreaper())

    @property
    def join_file(self) -> Optional[str]:
        """The ``cgroup.procs`` a child writes itself into before it executes."""
        return str(self.cgroup / "cgroup.procs") if self.cgroup is not None else None

    def kill_escaped(self, known: Iterable[int]) -> List[int]:
        """SIGKILL what is left of the job besides ``known`` pids; return the pids killed."""
        if self.cgroup is None and not self.subreaper:
            return []  # containment off (an embedding process may still be a subreaper)
        known = set(known)
        self.reap(known)  # zombies are no escape: collect them before looking
        found = sorted((set(self._members()) | set(_children())) - known - {os.getpid()})
        for pid in found:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if found:
            logger.warning(
                f"killed {plural(len(found), 'process')} that had left their process group "
                f"(pids {', '.join(map(str, found[:10]))})"
            )
        self.reap(known)
        return found

    def reap(self, known: Iterable[int]) -> None:
        """Collect exited orphans re-parented to us (never one of the ``known`` processes,
        whose status their ``Popen`` owns)."""
        for pid in set(_children()) - set(known):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)

    def _members(self) -> List[int]:
        if self.cgroup is None:
            return []
        try:
            text = (self.cgroup / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(line) for line in text.split()]

    def close(self, known: Iterable[int]) -> None:
        """Kill whatever is left in the cgroup and remove it."""
        self.kill_escaped(known)
        if self.cgroup is None:
            return
        with contextlib.suppress(OSError):
            (self.cgroup / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + EMPTY_WAIT
        while self._members() and time.monotonic() < deadline:
            self.reap(known)
            time.sleep(0.01)
        with contextlib.suppress(OSError):
            self.cgroup.rmdir()


def join_cgroup(path: Optional[str]) -> None:
    """In a child between fork and exec: move this process into the job's cgroup."""
    if path is None:
        return
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)


def _set_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    return bool(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _children() -> List[int]:
    """This process's children, from ``/proc`` (every thread's list)."""
    found: Set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{os.getpid()}/task")
    except OSError:
        return []
    for task in tasks:
        with contextlib.suppress(OSError):
            text = Path(f"/proc/{os.getpid()}/task/{task}/children").read_text()
            found.update(int(pid) for pid in text.split())
    return sorted(found)


def cgroup2_dir() -> Optional[Path]:
    """This process's cgroup in a mounted cgroup v2 hierarchy, if there is one."""
    try:
        own = next(
            line[3:].strip()
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if line.startswith("0::")
        )
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except (OSError, StopIteration):
        return None
    for line in mounts:
        fields = line.split()
        if " - cgroup2 " in line and len(fields) > 4:
            return Path(fields[4]) / own.lstrip("/")
    return None


def _remove_stale(base: Path) -> None:
    """Empty cgroups of launchers that are gone (killed together with their reaper)."""
    for path in base.glob("malaunch-*-*"):
        pid = path.name.split("-")[1]
        if pid.isascii() and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                path.rmdir()  # fails, harmlessly, while processes are still in it


def _make_cgroup() -> Optional[Path]:
    base = cgroup2_dir()
    if base is None or not os.access(base, os.W_OK):
        return None
    _remove_stale(base)
    path = base / f"malaunch-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        path.mkdir()
        (path / "cgroup.kill").stat()  # Linux 5.14+: without it the reaper could not kill it
    except OSError:
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return path
