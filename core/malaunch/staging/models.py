"""What staging is asked to do and what it did: frozen models, no I/O."""

from __future__ import annotations

from typing import Any, Dict, Literal, Tuple

from pydantic import Field

from malaunch.models import FrozenModel


class StageMapping(FrozenModel):
    """One ``LOCAL=URL`` pair: ``in`` copies URL to LOCAL before the ranks start, ``out``
    copies LOCAL to URL while they run and after they end."""

    local: str = Field(description="a path, relative to the launch directory; may hold {node}")
    url: str = Field(description="an fsspec URL (file://, s3://, obs://, ...) or a local path")
    direction: Literal["in", "out"]

    def __str__(self) -> str:
        arrow = "<-" if self.direction == "in" else "->"
        return f"{self.local} {arrow} {self.url}"


class RetryPolicy(FrozenModel):
    """How a failing transfer is retried: ``attempts`` tries in all, waiting ``first`` seconds
    after the first failure, ``factor`` times longer after each next one, at most ``most``."""

    attempts: int = Field(default=5, ge=1, le=100)
    first: float = Field(default=1.0, ge=0.0, le=60.0)
    factor: float = Field(default=2.0, ge=1.0, le=10.0)
    most: float = Field(default=15.0, ge=0.0, le=600.0)

    def delay(self, failures: int) -> float:
        """The wait after the ``failures``-th failure (1 for the first)."""
        return float(min(self.most, self.first * self.factor ** (failures - 1)))


class MappingReport(FrozenModel):
    """What one pass did for one mapping, for ``malaunch-summary.json``."""

    local: str = Field(description="LOCAL with {node}/{rank} expanded")
    url: str = Field(description="URL with {node}/{rank} expanded")
    direction: Literal["in", "out"]
    files: int = Field(default=0, description="files transferred")
    bytes: int = Field(default=0, description="bytes transferred")
    skipped: int = Field(default=0, description="files left alone: unchanged since last time")
    removed: int = Field(default=0, description="stale files of an earlier stage-in removed")
    seconds: float = 0.0
    errors: Tuple[str, ...] = ()

    def as_dict(self) -> Dict[str, Any]:
        """The JSON form (``errors`` as a list)."""
        return self.model_dump(mode="json")

    def plus(self, other: MappingReport) -> MappingReport:
        """This report and a later pass of the same mapping, added up."""
        return self.model_copy(
            update={
                "files": self.files + other.files,
                "bytes": self.bytes + other.bytes,
                "skipped": other.skipped,
                "removed": self.removed + other.removed,
                "seconds": self.seconds + other.seconds,
                "errors": self.errors + other.errors,
            }
        )
