"""Signals as events: the launcher's signals and SIGCHLD arrive as bytes on a wakeup pipe.

Python's C-level handler writes each caught signal's number to the fd given to
``signal.set_wakeup_fd``; the supervisor's selector watches that fd next to the output pipes, so
one ``select`` call waits for output, child exits and launcher signals alike: no polling and no
work inside signal handlers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Dict, FrozenSet, Iterable, Iterator, List, Set, Tuple

from malaunch.errors import UsageError
from malaunch.stopping import STOP_BY_DEFAULT, TERMINATING

# SIGKILL and SIGSTOP cannot be caught; SIGCHLD is how the launcher learns of exits.
UNFORWARDABLE: FrozenSet[int] = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD})


def parse_signal_names(spec: str) -> Tuple[int, ...]:
    """``--forward-signals`` names (``SIGTERM,HUP,usr1``) as numbers; UsageError otherwise."""
    result: List[int] = []
    for raw in filter(None, (item.strip().upper() for item in spec.split(","))):
        name = raw if raw.startswith("SIG") else f"SIG{raw}"
        # Real signals only: the signal module also holds SIG_DFL, SIG_IGN, SIG_SETMASK...
        if name not in signal.Signals.__members__:
            msg = f"--forward-signals: unknown signal {raw!r}"
            raise UsageError(msg)
        signum = int(signal.Signals[name])
        if signum in UNFORWARDABLE:
            # Checked here, with the option, not when the supervisor installs its handlers:
            # a dry run and a launch still waiting for its topology refuse it too.
            msg = f"--forward-signals: {name} cannot be caught and forwarded"
            raise UsageError(msg)
        result.append(signum)
    return tuple(result)


def _ignore(_signum: int, _frame: Any) -> None:
    """The Python-level handler does nothing: the wakeup pipe carries the event."""


class SignalWakeup:
    """Installs the handlers and the wakeup pipe; restores both on exit."""

    def __init__(self, forward: Iterable[int]) -> None:
        forward = frozenset(forward)
        for signum in sorted(forward):
            if signum not in signal.valid_signals() or signum in UNFORWARDABLE:
                msg = f"--forward-signals: signal {signum} cannot be caught and forwarded"
                raise UsageError(msg)
        # A signal whose default would kill the launcher on the spot and that is not
        # forwarded stops the job as SIGTERM does (malaunch.stopping).
        self.stopping: FrozenSet[int] = TERMINATING | (STOP_BY_DEFAULT - forward)
        self.handled: FrozenSet[int] = self.stopping | forward | {signal.SIGCHLD}
        self.read_fd = -1
        self._write_fd = -1
        self._previous: Dict[int, Any] = {}
        self._previous_fd = -1

    def __enter__(self) -> SignalWakeup:
        if threading.current_thread() is not threading.main_thread():
            msg = "supervise() must run in the main thread (signals, PR_SET_PDEATHSIG)"
            raise RuntimeError(msg)
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self._write_fd, False)
        for signum in self.handled:
            self._previous[signum] = signal.signal(signum, _ignore)
        self._previous_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        return self

    def __exit__(self, *_exc: object) -> None:
        signal.set_wakeup_fd(self._previous_fd)
        for signum, handler in self._previous.items():
            # None: the old handler was installed from C; the default is the closest we have.
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        os.close(self.read_fd)
        os.close(self._write_fd)

    def read(self) -> List[int]:
        """The signal numbers caught since the last call, in arrival order."""
        caught: List[int] = []
        while True:
            try:
                data = os.read(self.read_fd, 4096)
            except BlockingIOError:
                return caught
            if not data:
                return caught
            caught.extend(data)

    @contextlib.contextmanager
    def blocked(self) -> Iterator[Set[int]]:
        """Hold the handled signals back while processes are being started.

        Every started process is recorded (and known to the reaper) before a signal can be
        acted on, so a SIGTERM during the spawn of many processes cannot leave one behind.
        Yields the mask to restore in the children.
        """
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, self.handled)
        try:
            yield set(previous)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
