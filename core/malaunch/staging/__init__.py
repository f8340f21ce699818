"""Data staging (SPEC §10): inputs copied to each node before the ranks start, outputs
uploaded while they run and after they end, through fsspec (``obs://`` is OBS through its S3
API). See ``docs/staging.md``.

``parse_pairs`` and ``read_path_mapping`` turn ``--stage-in``/``--stage-out`` and
``--path-mapping`` into :class:`StageMapping` objects; a :class:`Stager` does the transfers and
reports each mapping as a :class:`MappingReport`. Nothing here imports fsspec or s3fs until a
:class:`Stager` is built, and the engine itself (asyncio, thread pools: tens of milliseconds
of every launcher's start-up) is imported only when :class:`Stager` is first named: a launch
without staging parses its options without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from malaunch.staging.errors import MappingFileError, StagingError
from malaunch.staging.models import MappingReport, RetryPolicy, StageMapping
from malaunch.staging.parse import expand, parse_pairs, per_node
from malaunch.staging.pathmap import read_path_mapping
from malaunch.staging.remote import INSTALL_S3, check_scheme, open_filesystem

if TYPE_CHECKING:
    from malaunch.staging.stager import Stager


def __getattr__(name: str) -> Any:
    if name == "Stager":
        from malaunch.staging.stager import Stager  # noqa: PLC0415 (the engine, on first use)

        return Stager
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = [
    "INSTALL_S3",
    "MappingFileError",
    "MappingReport",
    "RetryPolicy",
    "StageMapping",
    "Stager",
    "StagingError",
    "check_scheme",
    "expand",
    "open_filesystem",
    "parse_pairs",
    "per_node",
    "read_path_mapping",
]
