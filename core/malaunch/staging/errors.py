"""The staging errors that :mod:`malaunch.errors` has no class for.

A missing bucket, prefix, credential or mapping file is :class:`malaunch.errors.MissingInputError`
(66) and a bad option value :class:`malaunch.errors.UsageError` (64), as everywhere else.
"""

from __future__ import annotations

from malaunch.errors import ExitCode, MalaunchError


class StagingError(MalaunchError):
    """A transfer failed for good: the network, the server or the disk, after the retries."""

    exit_code = ExitCode.IO_ERROR


class MappingFileError(MalaunchError):
    """A ``--path-mapping`` file, or a key of the source, is malformed (names file and line)."""

    exit_code = ExitCode.DATA_ERROR
