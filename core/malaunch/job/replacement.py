"""Lost nodes and their replacements, as node 0's coordinator keeps them (SPEC §9 "Replacement").

A node launcher that is lost (its connection closed, its heartbeats stopped) or stopped by its
platform (evicted) ends the attempt; while restarts remain, the job then waits up to
``--rejoin-timeout`` for a launcher with the same node index and token, which may come from a
new address. :class:`Replacements` is the bookkeeping of that wait: who is awaited since when,
how long each replacement took, the addresses replacements came from (every later attempt's
host list follows them), and the job's state adopted from the survivors when node 0 itself was
replaced. The decisions stay the :class:`~malaunch.job.coordinator.Coordinator`'s.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple

from malaunch.job.protocol import Message

MAX_HOST = 253  # a DNS name's longest form; longer is no address
MAX_NAMED = 64  # absent nodes a stop names (it goes to every node: one bounded message)


@dataclasses.dataclass
class Loss:
    """One lost node of an attempt: when, and how long until its replacement joined."""

    node: int
    lost_at: float  # wall clock, for the record
    since: float  # the scheduler's clock, for durations
    rejoin_seconds: Optional[float] = None

    def record(self) -> Dict[str, Any]:
        rounded = None if self.rejoin_seconds is None else round(self.rejoin_seconds, 3)
        return {"node": self.node, "lost_at": self.lost_at, "rejoin_seconds": rounded}


@dataclasses.dataclass
class Adopted:
    """The job as the survivors of a lost node 0 report it to its replacement."""

    attempt: int
    failure: Optional[Dict[str, Any]]
    waited: float  # the longest any survivor waited for the new node 0


class Replacements:
    """Who is awaited, what each loss cost, where replacements came from."""

    def __init__(self, now: Callable[[], float], wall: Callable[[], float]) -> None:
        self.now = now
        self.wall = wall
        self.awaiting: Dict[int, Loss] = {}
        self.losses: List[Loss] = []  # of the attempt that ends (reported with the next start)
        self.hosts: Dict[int, str] = {}  # node -> the address its replacement came from
        self.adopted: Optional[Adopted] = None

    def lose(self, node: int) -> Loss:
        loss = Loss(node, self.wall(), self.now())
        self.awaiting[node] = loss
        self.losses.append(loss)
        return loss

    def rejoined(self, node: int, host: Optional[str]) -> Optional[Loss]:
        """A launcher with ``node``'s index joined: the loss it replaces, if one was awaited."""
        loss = self.awaiting.pop(node, None)
        if loss is None:
            return None
        loss.rejoin_seconds = self.now() - loss.since
        if host:
            self.hosts[node] = host
        return loss

    def adopt(self, message: Message) -> int:
        """A survivor's ``resume`` report: the attempt it last heard, its failure, its wait.
        Returns the attempt the job is at as far as the survivors tell (-1: not known)."""
        attempt, waited = message.get("attempt"), message.get("waited")
        failure = message.get("failure")
        if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 0:
            seconds = float(waited) if isinstance(waited, (int, float)) and waited >= 0 else 0.0
            known = self.adopted
            if known is None or attempt > known.attempt:
                known = Adopted(attempt, failure if isinstance(failure, dict) else None, 0.0)
            known.waited = max(known.waited, min(seconds, 1e9))
            self.adopted = known
        return -1 if self.adopted is None else self.adopted.attempt

    def node_0_loss(self) -> Loss:
        """The loss of node 0 as the adopted state tells it (replaced by this launcher)."""
        assert self.adopted is not None
        waited = self.adopted.waited
        return Loss(0, self.wall() - waited, self.now() - waited, rejoin_seconds=waited)

    def start_fields(self) -> Dict[str, Any]:
        """What a ``start`` (or the final ``stop``) tells every node about the replacements:
        the losses of the attempt that ended, and the addresses of every replaced node."""
        fields: Dict[str, Any] = {}
        if self.losses:
            fields["losses"] = [loss.record() for loss in self.losses]
        if self.hosts:
            fields["hosts"] = {str(node): host for node, host in sorted(self.hosts.items())}
        self.losses = []
        return fields


def lost_node(node: int) -> Dict[str, Any]:
    """The failure of a node whose launcher disappeared."""
    return {"kind": "lost", "node": node, "rank": None, "code": None}


def waiting_stop(
    attempt: int, failure: Dict[str, Any], decision: Optional[str], timeout: float
) -> Message:
    """The ``stop`` that ends an attempt to wait for ``failure``'s node's replacement."""
    stop = {"t": "stop", "attempt": attempt, "final": False, "failure": failure}
    replace = failure.get("node")
    return {
        **stop,
        "decision": decision,
        "delay": 0.0,
        "replace": replace,
        "rejoin_timeout": timeout,
    }


def absent(missing: List[int]) -> Dict[str, Any]:
    """The failure of a job whose nodes ``missing`` never joined: the first
    :data:`MAX_NAMED` of them, and how many there were."""
    named = missing[:MAX_NAMED]
    return {
        "kind": "absent",
        "node": None,
        "nodes": named,
        "node_count": len(missing),
        "code": None,
    }


def absent_nodes(failure: Dict[str, Any]) -> str:
    """``[1, 2]``: the nodes an ``absent`` failure names; past them, ``[1, 2, ..., 64] and
    9,935 more``."""
    nodes, count = failure.get("nodes"), failure.get("node_count")
    if isinstance(nodes, list) and isinstance(count, int) and count > len(nodes):
        return f"{nodes} and {count - len(nodes):,} more"
    return str(nodes)


def never_came_back(node: int, timeout: float) -> Tuple[Dict[str, Any], str]:
    """The final failure and decision when ``node``'s replacement did not join in time."""
    limit = f"--rejoin-timeout {timeout:g}s"
    failure = {**lost_node(node), "reason": f"its replacement did not join within {limit}"}
    return failure, f"node {node} never came back within {limit}"


def host_of(message: Message) -> Optional[str]:
    """The address a joining node says it has, if it is a plausible one."""
    host = message.get("host")
    if not isinstance(host, str) or not 0 < len(host) <= MAX_HOST:
        return None
    if not host.isascii() or not all(c.isalnum() or c in ".-_:[]%" for c in host):
        return None
    return host


def losses_of(message: Message) -> List[Dict[str, Any]]:
    """The lost nodes a ``start`` or final ``stop`` reports for the attempt that ended."""
    losses = message.get("losses")
    return [loss for loss in losses if isinstance(loss, dict)] if isinstance(losses, list) else []


def hosts_of(message: Message) -> Dict[int, str]:
    """The addresses replaced nodes came from, as a ``start`` carries them."""
    hosts = message.get("hosts")
    if not isinstance(hosts, dict):
        return {}
    return {int(k): v for k, v in hosts.items() if k.isdigit() and isinstance(v, str)}
