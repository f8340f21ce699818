"""Starting one process of a plan: its own session, its log pipe, death with the launcher.

Each process gets a new session (so it is the leader of its own process group and the launcher
can signal it and its children as one), ``PR_SET_PDEATHSIG=SIGKILL`` (so it dies with the
launcher even if the launcher is SIGKILLed), the launcher's environment plus the plan's, and one
pipe for stdout and stderr together, which the supervisor copies to the log file. A process the
plan binds to CPUs (``ProcessSpec.cpus``, ``--cpu-bind``) gets them with ``sched_setaffinity``
between fork and exec, so the program starts on them and every thread and child it makes
inherits them; no ``taskset`` or ``numactl`` is needed.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import os
import signal
import subprocess
import sys
from typing import Callable, FrozenSet, Iterable, Mapping, Optional, Tuple

from malaunch.cpus.cpulist import format_cpulist, parse_cpulist
from malaunch.errors import LaunchError
from malaunch.events import Clock
from malaunch.models import ProcessSpec
from malaunch.supervisor.containment import join_cgroup
from malaunch.supervisor.output import LineRelay, describe
from malaunch.supervisor.preflight import limits_for_children, restore_limits_in_child

PR_SET_PDEATHSIG = 1
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # the constant appeared in Python 3.10
# A larger pipe lets a chatty worker run ahead while the launcher is busy with another rank.
PIPE_SIZE = 1 << 20
RESTART_VAR = "MALAUNCH_RESTART_COUNT"


def _load_prctl() -> Optional[Callable[..., int]]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _load_prctl()


@dataclasses.dataclass
class Child:
    """A started process and what the supervisor tracks about it."""

    spec: ProcessSpec
    proc: subprocess.Popen[bytes]
    log_fd: int
    pipe_fd: int  # -1 once the pipe reached end-of-file
    relay: Optional[LineRelay]
    start_wall: float
    start_mono: float
    end_wall: Optional[float] = None
    end_mono: Optional[float] = None
    returncode: Optional[int] = None  # Popen convention: -N when killed by signal N
    last_activity: float = 0.0  # monotonic time of its last output or heartbeat, or its start
    heard_from: bool = False  # any output or heartbeat yet (hang detection's start-up phase)
    file_id: int = -1  # its log file's number in the run manifest (supervisor/runlog.py)
    log_offset: int = 0  # bytes in its log file so far (a restart appends)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.returncode is None


def make_child_setup(
    parent_pid: int, reset: Iterable[int], mask: Iterable[int], cgroup_procs: Optional[str] = None
) -> Callable[[], None]:
    """What runs in each child between fork and exec.

    PDEATHSIG fires when the *thread* that forked exits, which is why the supervisor spawns
    from the main thread. The handlers the launcher installed are reset before the signal mask
    is restored, so a signal forwarded before exec kills the child instead of being swallowed.
    With ``cgroup_procs`` the child joins the job's cgroup before it can start anything. The
    open-files limit the launcher raised for itself is set back to the one it found
    (:mod:`malaunch.supervisor.preflight`).
    """
    reset = tuple(reset)
    mask = tuple(mask)
    limits = limits_for_children()

    def setup() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the launcher died before PDEATHSIG was armed
            os._exit(1)
        join_cgroup(cgroup_procs)
        restore_limits_in_child(limits)
        for signum in reset:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    return setup


def plan_cpus(spec: ProcessSpec) -> Optional[FrozenSet[int]]:
    """The CPUs the plan binds ``spec`` to, None if none; LaunchError (71) if they are not all
    CPUs this launcher may use (``sched_setaffinity`` would refuse them in the child, or, past a
    narrower launcher affinity, run the process outside it)."""
    if spec.cpus is None:
        return None
    try:
        cpus = parse_cpulist(spec.cpus)
    except ValueError as exc:
        msg = f"cannot start {describe(spec)}: the plan gives it CPUs {spec.cpus!r}: {exc}"
        raise LaunchError(msg) from exc
    own = frozenset(os.sched_getaffinity(0))
    if not cpus or not cpus <= own:
        msg = (
            f"cannot start {describe(spec)}: its CPUs ({spec.cpus or 'none'}, --cpu-bind) are "
            f"not all CPUs this launcher may use ({format_cpulist(own)})"
        )
        raise LaunchError(msg)
    return cpus


def bound_to(setup: Callable[[], None], cpus: Optional[FrozenSet[int]]) -> Callable[[], None]:
    """``setup``, then binding the child to ``cpus`` (if any) before it execs."""
    if cpus is None:
        return setup

    def bind() -> None:
        setup()
        os.sched_setaffinity(0, cpus)

    return bind


def open_log(path: str, append: bool) -> int:
    """Open (create) a process's log file for raw writes; a restart appends to it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
    return os.open(path, flags | (0 if append else os.O_TRUNC), 0o644)


def _output_pipe() -> Tuple[int, int]:
    read_fd, write_fd = os.pipe()
    # Over the per-user pipe quota this fails, and the default size still works.
    with contextlib.suppress(OSError):
        fcntl.fcntl(read_fd, F_SETPIPE_SZ, PIPE_SIZE)
    os.set_blocking(read_fd, False)
    return read_fd, write_fd


def spawn(
    spec: ProcessSpec,
    *,
    environ: Mapping[str, str],
    attempt: int,
    setup: Callable[[], None],
    relay: Optional[LineRelay],
    clock: Clock,
    extra_env: Optional[Mapping[str, str]] = None,
    append: Optional[bool] = None,
) -> Child:
    """Start one process of the plan; LaunchError (71) names the process if it cannot start.

    ``extra_env`` is what the launcher adds at run time (heartbeat address, faulthandler) and
    a variable the plan or the user already set wins over it. The log is appended to from
    attempt 1 on (``append`` decides otherwise: a process started again within an attempt).
    """
    counts = dict.fromkeys((RESTART_VAR, *spec.attempt_env), str(attempt))
    env = {**environ, **(extra_env or {}), **spec.env, **counts}
    setup = bound_to(setup, plan_cpus(spec))
    try:
        for directory in (spec.cwd, *spec.dirs):
            os.makedirs(directory, exist_ok=True)
        if spec.error_file is not None:
            # An error file left by an earlier attempt or run must not be read as this one's.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(spec.error_file)
        log_fd = open_log(spec.log_file, append=attempt > 0 if append is None else append)
    except OSError as exc:
        msg = f"cannot start {describe(spec)}: {exc.filename}: {exc.strerror}"
        raise LaunchError(msg) from exc
    read_fd, write_fd = _output_pipe()
    try:
        proc = _popen(spec, env, write_fd, setup)
    except BaseException:
        os.close(read_fd)
        os.close(log_fd)
        raise
    finally:
        os.close(write_fd)
    started = clock.now()
    offset = os.fstat(log_fd).st_size
    child = Child(spec, proc, log_fd, read_fd, relay, clock.wall(), started, last_activity=started)
    child.log_offset = offset
    return child


def _popen(
    spec: ProcessSpec, env: Mapping[str, str], output_fd: int, setup: Callable[[], None]
) -> subprocess.Popen[bytes]:
    if not spec.argv:
        msg = f"cannot start {describe(spec)}: the plan gives it an empty command"
        raise LaunchError(msg)
    try:
        return subprocess.Popen(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=output_fd,
            stderr=subprocess.STDOUT,
            cwd=spec.cwd,
            env=env,
            start_new_session=True,
            preexec_fn=setup,  # noqa: PLW1509 (the launcher spawns from its only thread)
        )
    except OSError as exc:
        msg = f"cannot start {describe(spec)}: {spec.argv[0]!r}: {exc.strerror}"
        raise LaunchError(msg) from exc
    except subprocess.SubprocessError as exc:
        msg = f"cannot start {describe(spec)}: {spec.argv[0]!r}: {exc}"
        raise LaunchError(msg) from exc
