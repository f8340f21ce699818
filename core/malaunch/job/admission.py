"""Fair admission to the job channel: which unauthenticated connection makes room for the next.

Anyone who can reach the job port can open connections faster than node 0 can refuse them, so
refusing the newest when the waiting room is full hands the port to whoever floods it: a node
with the token, arriving after the flood, is always the newest. The rules here instead:

- every accepted connection gets at least ``min_chance`` seconds to answer the challenge (a
  node with the token answers within one round trip);
- when the room is full, the connection that makes room is one that has had its chance, from
  the address that holds the most waiting connections, and of those the oldest: a flood from
  one address evicts itself, never a node from another address;
- when no waiting connection has had its chance yet, nothing is accepted until one has: the
  rest wait in the kernel's listen backlog, in arrival order, so a node behind a flood is
  reached in its turn instead of by lottery.

Pure bookkeeping, no I/O: :class:`~malaunch.job.server.ChannelServer` owns the sockets.
"""

from __future__ import annotations

import collections
from typing import Counter, Dict, Generic, Hashable, Optional, Tuple, TypeVar

Key = TypeVar("Key", bound=Hashable)


class WaitingRoom(Generic[Key]):
    """Connections waiting for their handshake, in the order they were accepted."""

    def __init__(self, capacity: int, min_chance: float) -> None:
        self.capacity = capacity
        self.min_chance = min_chance
        self.waiting: Dict[Key, Tuple[str, float]] = {}  # key -> (source address, accepted at)
        self.per_source: Counter[str] = collections.Counter()

    def __len__(self) -> int:
        return len(self.waiting)

    def __contains__(self, key: object) -> bool:
        return key in self.waiting

    def full(self) -> bool:
        return len(self.waiting) >= self.capacity

    def add(self, key: Key, source: str, now: float) -> None:
        self.waiting[key] = (source, now)
        self.per_source[source] += 1

    def remove(self, key: Key) -> None:
        entry = self.waiting.pop(key, None)
        if entry is not None:
            self.per_source[entry[0]] -= 1
            if not self.per_source[entry[0]]:
                del self.per_source[entry[0]]

    def victim(self, now: float) -> Optional[Key]:
        """The connection to close to make room, or None while none has had its chance."""
        best: Optional[Key] = None
        best_count = 0
        for key, (source, since) in self.waiting.items():
            if now - since < self.min_chance:
                break  # accepted in order: the rest are younger still
            count = self.per_source[source]
            if count > best_count:  # the oldest of the biggest holder (strictly more wins)
                best, best_count = key, count
        return best

    def next_chance_over(self) -> Optional[float]:
        """When the oldest waiting connection will have had its chance (None: none waits)."""
        for _, since in self.waiting.values():
            return since + self.min_chance
        return None
