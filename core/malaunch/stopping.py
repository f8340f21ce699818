"""The signals that stop malaunch, at every moment of its life.

While it supervises processes, the launcher reads signals as events (``supervisor.signals``):
it stops the job, writes the summary and exits ``128 + N``. Before that (the command line is
read, plugins load, a rank table or node 0 is awaited, the plan is made) and in the tool
commands, the same signals raise :class:`Stopped` from their handler, which the command line's
error boundary turns into one line and ``128 + N``: not a traceback (SIGINT's
``KeyboardInterrupt``), nor a death by the default action, without a word and without the
cleanup of ``finally`` blocks (SIGTERM's, SIGUSR1's).

Standard library only: the console script installs the handlers before it imports anything
heavy, so that a signal during the imports is handled too.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any, Callable, Dict, FrozenSet, Iterator, List

# Signals that stop the launcher (and are forwarded to the processes first).
TERMINATING: FrozenSet[int] = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})

# Other signals whose default action ends a process. Not forwarded (--forward-signals), each
# stops the job as SIGTERM does instead of killing the launcher on the spot (Slurm sends
# SIGUSR1 before a time limit, a batch system SIGXCPU). The faults (SIGSEGV, SIGBUS, SIGFPE,
# SIGILL, SIGABRT, SIGTRAP, SIGSYS) are the launcher's own and keep their core dump; SIGQUIT
# (Ctrl-\) is the user's way to end it at once; SIGPIPE is ignored by Python already.
STOP_BY_DEFAULT: FrozenSet[int] = frozenset(
    getattr(signal, name)
    for name in (
        "SIGUSR1",
        "SIGUSR2",
        "SIGALRM",
        "SIGVTALRM",
        "SIGPROF",
        "SIGIO",
        "SIGPWR",
        "SIGXCPU",
        "SIGSTKFLT",
    )
    if hasattr(signal, name)
)


class Stopped(BaseException):
    """A stopping signal arrived where no event loop reads signals: raised from the handler,
    so that it ends whatever the command is doing (a read, a wait, an import). A
    BaseException, as KeyboardInterrupt is, so that no ``except Exception`` on the way takes
    it for an error of its own."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_arrived: List[int] = []


def _raise(signum: int, _frame: Any) -> None:
    # Only the first raises: a second signal must not cut short the cleanup the first set off.
    first = not _arrived
    _arrived.append(signum)
    if first:
        raise Stopped(signum)


def raise_on_stop_signals() -> None:
    """From now on, until a supervisor installs its own handlers (and again after), each
    stopping signal raises :class:`Stopped` in the main thread."""
    for signum in TERMINATING | STOP_BY_DEFAULT:
        signal.signal(signum, _raise)


def arrived() -> bool:
    """Whether a stopping signal has come in (the first raised :class:`Stopped`)."""
    return bool(_arrived)


@contextlib.contextmanager
def raising_on_stop_signals() -> Iterator[Callable[[], bool]]:
    """:func:`raise_on_stop_signals` for a block, the handlers before it put back after.

    It yields :func:`arrived`, for a loop that looks between two steps too: the handler raises
    rather than only noting the signal, since a note is read only where the code looks for it.
    """
    previous: Dict[int, Any] = {
        signum: signal.getsignal(signum) for signum in TERMINATING | STOP_BY_DEFAULT
    }
    raise_on_stop_signals()
    try:
        yield arrived
    finally:
        for signum, handler in previous.items():
            if handler is not None:  # None: a handler set outside Python, left as it is
                signal.signal(signum, handler)


def stop_line(signum: int) -> str:
    """What a stop before (or without) a supervisor says, one line on stderr."""
    return f"malaunch: warning: received {signal_name(signum)}: stopping\n"


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15 (``signal 70`` for a number without a name)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
