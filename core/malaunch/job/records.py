"""What the :class:`~malaunch.job.coordinator.Coordinator` works through and keeps: the
transport its commands take, the scheduler it times things with, its record of each attempt."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Protocol

from malaunch.job.protocol import Message


class Transport(Protocol):
    """How commands reach the nodes: every node (node 0 itself included), or one other."""

    def broadcast(self, message: Message) -> None: ...

    def tell(self, node: int, message: Message) -> None: ...


class Scheduler(Protocol):
    """The event loop's clock and timers."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> object: ...


@dataclasses.dataclass
class AttemptRecord:
    """One attempt as the summary reports it."""

    attempt: int
    started: float
    failure: Optional[Dict[str, Any]] = None
    decision: Optional[str] = None
    delay: Optional[float] = None
