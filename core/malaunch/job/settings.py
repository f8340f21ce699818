"""What every node launcher of a job derives alike, without talking to the others first:
whether there is a job channel, where node 0 serves it, and the token that guards it.

The **job port** is ``--job-port`` when given; else the rendezvous (master) port plus one
when the topology names one (so nodes agree without coordination, and the pair is easy to
open in a firewall); else a port in 20000-29999 hashed from what the job shares. Node 0's
launcher listens on every interface at that port, as rendezvous servers do; the others
connect to node 0's address, ``nodes[0].host``.

What the job shares is what every node reads alike from its platform (:func:`job_identity`),
never the whole host list: on several platforms a pod knows only the master's address and
names the other nodes with placeholders that differ from pod to pod.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import List, Optional

from malaunch.errors import UsageError
from malaunch.job.protocol import derive_token
from malaunch.models import Topology

DEFAULT_HEARTBEAT_TIMEOUT = 5.0
BEATS_PER_TIMEOUT = 5  # how often each side says it is alive, per heartbeat timeout
# Node 0 beats every node and reads every answer: at most this many of each a second, so that
# its CPU stays a few percent of one core at 10,000 nodes. Above it the interval grows.
HEARTBEATS_PER_SECOND = 3000
MIN_BEATS_PER_TIMEOUT = 3  # a grown interval grows the timeout too: 3 beats fit in one
HASHED_PORTS = (20000, 10000)  # first port, how many


@dataclasses.dataclass(frozen=True)
class JobSettings:
    """The job channel of this node: node 0 serves ``port``; the others dial ``host:port``."""

    node_rank: int
    nnodes: int
    host: str
    port: int
    token: bytes
    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT
    wait_timeout: float = 600.0
    own_host: str = ""  # this node's address as its platform names it (a replacement's new one)

    @property
    def serves(self) -> bool:
        return self.node_rank == 0

    @property
    def heartbeat_interval(self) -> float:
        """How often node 0 beats (and each node answers): five times per timeout, or every
        ``(nnodes - 1) / HEARTBEATS_PER_SECOND`` seconds when that is longer (above 3,000
        nodes), so that node 0 never handles more than that many beats a second."""
        spread = (self.nnodes - 1) / HEARTBEATS_PER_SECOND
        return max(0.05, self.heartbeat_timeout / BEATS_PER_TIMEOUT, spread)

    @property
    def silence_timeout(self) -> float:
        """Silence after which the other side is lost: ``--heartbeat-timeout``, or three
        intervals where the interval has grown past a third of it (above 5,000 nodes at the
        default 5 s: 10 s at 10,000 nodes)."""
        return max(self.heartbeat_timeout, MIN_BEATS_PER_TIMEOUT * self.heartbeat_interval)


def job_port(topology: Topology, requested: Optional[int]) -> int:
    """``--job-port``, else master port + 1, else a port hashed from the job's identity."""
    if requested is not None:
        return requested
    if topology.master_port is not None:
        if topology.master_port >= 65535:
            msg = (
                f"master port {topology.master_port} leaves no room for the job port "
                "(master port + 1): give --job-port"
            )
            raise UsageError(msg)
        return topology.master_port + 1
    identity = json.dumps(job_identity(topology))
    first, count = HASHED_PORTS
    return first + int(hashlib.sha256(identity.encode()).hexdigest()[:8], 16) % count


def job_identity(topology: Topology) -> List[object]:
    """What every node of one job reads alike: the job id, the node count, the world size and
    the rendezvous port, and the rendezvous address where the platform gives no job id.

    The address only stands in for a missing id: with one, it adds nothing, and it is not the
    same everywhere on every platform (a MindX TensorFlow chief reads its own pod IP, the
    workers its Service's IP).
    """
    master = topology.master_addr if topology.job_id is None else None
    return [topology.job_id, topology.nnodes, topology.world_size, topology.master_port, master]


def job_settings(
    topology: Topology,
    *,
    requested_port: Optional[int],
    secret: str,
    heartbeat_timeout: float,
    wait_timeout: float,
    enabled: bool = True,
) -> Optional[JobSettings]:
    """The channel settings, or None when this job needs none (one node, or switched off, or
    a platform whose ``nodes[0].host`` the other nodes cannot dial: ``peers_reachable``)."""
    if not enabled or topology.nnodes < 2 or not topology.peers_reachable:
        return None
    port = job_port(topology, requested_port)
    token = derive_token(job_identity(topology), port, secret)
    return JobSettings(
        node_rank=topology.node_rank,
        nnodes=topology.nnodes,
        host=topology.nodes[0].host,
        port=port,
        token=token,
        heartbeat_timeout=heartbeat_timeout,
        wait_timeout=wait_timeout,
        own_host=topology.this_node.host,
    )
