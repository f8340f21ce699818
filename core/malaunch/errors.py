"""Exit codes and the one exception tree of malaunch.

Every launcher fault is a :class:`MalaunchError` subclass that carries its exit code, so
the CLI (:mod:`malaunch.cli.main`) can catch them in one place and print a single
``malaunch: error:`` line.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Documented exit codes of the ``malaunch`` command.

    Worker failures are reported with the failing worker's own code (or ``128 + N`` when it
    died of signal N); ``128 + N`` is also used when the launcher itself is stopped by signal
    N. The launcher's own faults use the BSD ``sysexits.h`` values so a platform's retry policy
    can tell them apart from common worker codes.
    """

    OK = 0
    USAGE = 64  # EX_USAGE: bad command line or option values
    DATA_ERROR = 65  # EX_DATAERR: malformed variable, rank table or JSON
    NO_INPUT = 66  # EX_NOINPUT: an input file or directory is missing
    UNAVAILABLE = 69  # EX_UNAVAILABLE: topology not ready before --wait-timeout
    SOFTWARE = 70  # EX_SOFTWARE: internal error
    OS_ERROR = 71  # EX_OSERR: a process could not be started
    IO_ERROR = 74  # EX_IOERR: data staging failed, or an output file (rank table, report)
    PEER_FAILED = 75  # EX_TEMPFAIL: stopped because another node of the job failed
    CONFIG = 78  # EX_CONFIG: plugin missing, duplicate or broken
    HANG = 124  # as timeout(1): a rank was silent past --hang-timeout

    @staticmethod
    def for_signal(signum: int) -> int:
        """The shell convention for "terminated by signal N"."""
        return 128 + signum


class MalaunchError(Exception):
    """Base of every error the launcher reports to the user without a traceback."""

    exit_code: ExitCode = ExitCode.SOFTWARE


class UsageError(MalaunchError):
    """Bad options or arguments on the command line."""

    exit_code = ExitCode.USAGE


class TopologyError(MalaunchError):
    """A platform variable, rank table or JSON document is malformed or inconsistent."""

    exit_code = ExitCode.DATA_ERROR


class MissingInputError(MalaunchError):
    """A file or directory the launcher was pointed at does not exist."""

    exit_code = ExitCode.NO_INPUT


class NotReadyError(MalaunchError):
    """The topology (rank table, peers) did not become ready before the deadline."""

    exit_code = ExitCode.UNAVAILABLE


class PeerError(MalaunchError):
    """The other node launchers of the job could not be reached or authenticated in time."""

    exit_code = ExitCode.UNAVAILABLE


class PluginError(MalaunchError):
    """A plugin is missing, registered twice, or broken."""

    exit_code = ExitCode.CONFIG


class LaunchError(MalaunchError):
    """A process of the plan could not be started."""

    exit_code = ExitCode.OS_ERROR


class OutputError(MalaunchError):
    """A tool command's output file cannot be written (EX_IOERR: I/O on a file, where 71
    would say that a process could not be started)."""

    exit_code = ExitCode.IO_ERROR
