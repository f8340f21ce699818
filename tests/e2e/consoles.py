"""Consoles for launchers under test: a real pipe or a pseudo-terminal whose reader can stall.

:class:`PipeConsole` holds the read end of a pipe unread for ``stall`` seconds (a ``| tee``
that blocks, a slow log shipper), then reads it to the end. :class:`PtyConsole` is a terminal
paused with Ctrl-S: XOFF is sent to the pty master before the launcher starts, XON after
``stall`` seconds, and the master is read to the end. Either way the launcher's stdout and
stderr are the console (``2>&1``), and :meth:`Console.output` is everything it showed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pty
import signal
import subprocess
import termios
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from malaunch.testing import clean_env


class Console:
    """Where a launcher's stdout and stderr go, and a reader that comes back after ``stall``."""

    def __init__(self, stall: float) -> None:
        self.stall = stall
        self.chunks: List[bytes] = []
        self.done = threading.Event()
        self.child_end = -1  # what the launcher gets as stdout and stderr
        self.our_end = -1

    def start(
        self, argv: Sequence[str], cwd: Path, env: Optional[Dict[str, str]] = None
    ) -> subprocess.Popen[bytes]:
        """Start the launcher on this console, and the reader that stalls, then reads."""
        proc = subprocess.Popen(
            list(argv),
            env=env if env is not None else clean_env(),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self.child_end,
            stderr=self.child_end,
            start_new_session=True,
        )
        os.close(self.child_end)  # the launcher (and what it starts) holds it now
        threading.Thread(target=self._read, daemon=True).start()
        return proc

    def _read(self) -> None:
        time.sleep(self.stall)
        self.resume()
        while True:
            try:
                chunk = os.read(self.our_end, 1 << 16)
            except OSError as exc:  # EIO: every holder of a pty's terminal side is gone
                if exc.errno != errno.EIO:
                    raise
                chunk = b""
            if not chunk:
                break
            self.chunks.append(chunk)
        self.done.set()

    def resume(self) -> None:
        """The reader comes back."""

    def output(self, timeout: float) -> bytes:
        """Everything the console showed, once the launcher and its helpers have closed it."""
        assert self.done.wait(timeout), "the console was never closed"
        os.close(self.our_end)
        return b"".join(self.chunks)


class PipeConsole(Console):
    def __init__(self, stall: float) -> None:
        super().__init__(stall)
        self.our_end, self.child_end = os.pipe()


class PtyConsole(Console):
    """A terminal paused with Ctrl-S (XOFF) for ``stall`` seconds; ``\\n`` kept as it is."""

    def __init__(self, stall: float) -> None:
        super().__init__(stall)
        self.our_end, self.child_end = pty.openpty()
        attrs = termios.tcgetattr(self.child_end)
        attrs[0] |= termios.IXON  # the terminal obeys Ctrl-S / Ctrl-Q
        attrs[1] &= ~termios.ONLCR  # bytes as written: no \r added before \n
        termios.tcsetattr(self.child_end, termios.TCSANOW, attrs)
        if stall > 0:
            os.write(self.our_end, b"\x13")  # XOFF: output stops at once

    def resume(self) -> None:
        os.write(self.our_end, b"\x11")  # XON


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End a launcher left running by a failed test, with everything in its session."""
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
