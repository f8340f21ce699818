"""The fallback source: this machine alone, on loopback.

``--nproc-per-node`` processes, else one per device listed in ``ASCEND_RT_VISIBLE_DEVICES`` /
``CUDA_VISIBLE_DEVICES``, else one; the master listens on a free loopback port.
"""

from __future__ import annotations

import secrets
import time
from typing import Mapping

from malaunch.models import Node, ResolveOptions, Topology, device_slots
from malaunch.net import free_port
from malaunch.topology import envparse
from malaunch.topology.data import parse_data_paths

SOURCE = "local"
LOOPBACK = "127.0.0.1"


def detect(env: Mapping[str, str]) -> bool:
    """Always applies: ``auto`` tries it last."""
    del env
    return True


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """One node on 127.0.0.1 with one rank per process slot."""
    ids = envparse.device_ids(env, options.nproc_per_node, "--nproc-per-node")
    devices = device_slots(0, ids)
    return Topology(
        source=SOURCE,
        nodes=(Node(index=0, host=LOOPBACK, devices=devices),),
        node_rank=0,
        master_addr=LOOPBACK,
        master_port=free_port(LOOPBACK),
        job_id=envparse.job_id(env) or new_job_id(),
        data=parse_data_paths(env),
    )


def new_job_id() -> str:
    """``malaunch-<UTC time>-<random>``: sorts by start time, unique across quick reruns."""
    return f"malaunch-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"
