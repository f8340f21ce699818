"""The reaper: a tiny watchdog process that kills every process group if the launcher dies.

``PR_SET_PDEATHSIG`` (set in each child, see :mod:`malaunch.supervisor.spawn`) kills the processes
the launcher started, but not their own children. The reaper covers those: it runs in its own
session, learns each process group id through a pipe, and when the pipe reaches end-of-file
without the launcher having said ``done`` (the launcher was SIGKILLed or crashed) it SIGKILLs
every group it still knows. It is a bare interpreter (``-I -S``: no site, no environment) running
the few lines below, so it costs a few milliseconds of CPU once and nothing while it waits.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import IO, Optional

from malaunch.log import logger

# Protocol, one line each: "+PGID" watch a group, "-PGID" forget it, "cPATH" kill the cgroup at
# PATH too (the job's, which holds even processes that left their groups), "done" exit without
# killing.
REAPER_SOURCE = """
import os, signal, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
groups, buf, done, cgroup = set(), b"", False, None
while True:
    try:
        data = os.read(0, 65536)
    except InterruptedError:
        continue
    if not data:
        break
    buf += data
    *lines, buf = buf.split(b"\\n")
    for line in lines:
        if line == b"done":
            done = True
        elif line[:1] == b"+":
            groups.add(int(line[1:]))
        elif line[:1] == b"-":
            groups.discard(int(line[1:]))
        elif line[:1] == b"c":
            cgroup = line[1:]
if not done:
    if cgroup:
        try:
            with open(cgroup + b"/cgroup.kill", "wb") as kill:
                kill.write(b"1")
        except OSError:
            pass
        for _ in range(200):  # it can be removed once its processes are gone (about 1 ms)
            try:
                os.rmdir(cgroup)
                break
            except FileNotFoundError:  # the launcher removed it already: nothing to wait for
                break
            except OSError:
                time.sleep(0.01)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
"""

# How long a normal exit waits for the reaper to go; it exits as soon as it reads "done".
REAPER_EXIT_TIMEOUT = 2.0


class Reaper:
    """The launcher's end of the reaper: register groups, then close with or without killing."""

    def __init__(self, proc: Optional[subprocess.Popen[bytes]]) -> None:
        self.proc = proc
        self.pipe: Optional[IO[bytes]] = proc.stdin if proc is not None else None

    @classmethod
    def start(cls, python: str = sys.executable) -> Reaper:
        """Start the watchdog; without one (no interpreter) PDEATHSIG alone has to do."""
        try:
            proc = subprocess.Popen(
                [python, "-I", "-S", "-c", REAPER_SOURCE],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,  # a Ctrl-C or a group signal must not reach it
                bufsize=0,
            )
        except OSError as exc:
            logger.warning(f"cannot start the reaper ({exc}); grandchildren may outlive a crash")
            return cls(None)
        return cls(proc)

    def watch(self, pgid: int) -> None:
        """Kill this process group if the launcher dies."""
        self._send(b"+%d\n" % pgid)

    def kill_cgroup(self, cgroup: Optional[Path]) -> None:
        """Kill this cgroup too if the launcher dies (the job's: nothing escapes it)."""
        if cgroup is not None:
            self._send(b"c" + bytes(cgroup) + b"\n")

    def forget(self, pgid: int) -> None:
        """The launcher has cleaned this group up itself; its id may be reused from now on."""
        self._send(b"-%d\n" % pgid)

    def release(self) -> None:
        """Normal exit: tell the reaper to leave without killing (it exits on its own)."""
        self._send(b"done\n")
        self._close_pipe()

    def kill_all(self) -> None:
        """An unexpected error in the launcher: the reaper kills every group it still knows."""
        self._close_pipe()  # end-of-file without "done", as if the launcher had died
        self.close()

    def _close_pipe(self) -> None:
        if self.pipe is not None:
            with contextlib.suppress(OSError):
                self.pipe.close()
            self.pipe = None

    def close(self) -> None:
        """Release the reaper, and wait for it to exit (no zombie is left behind)."""
        self.release()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=REAPER_EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _send(self, line: bytes) -> None:
        if self.pipe is None:
            return
        try:
            self.pipe.write(line)
        except OSError as exc:  # the reaper died: carry on, PDEATHSIG still protects
            logger.debug(f"reaper gone: {exc}")
            self.pipe = None

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None
