"""Checks before anything starts: a taken master port fails now, with a clear message, instead
of as a rendezvous timeout in every rank minutes later."""

from __future__ import annotations

import socket
from typing import List, Tuple

from malaunch.errors import LaunchError
from malaunch.models import LaunchPlan
from malaunch.net import port_taken


def _wildcards() -> List[Tuple[socket.AddressFamily, str]]:
    """The addresses the rendezvous server will bind: the wildcard of each address family.

    torch's TCPStore, TF and MindSpore's scheduler listen on all interfaces, so a listener on
    any address of this host (also 127.0.0.1 only) would make their bind fail; binding the
    wildcard sees every such conflict. The master address itself may be a name of a load
    balancer or another interface, so it is not bound directly.
    """
    families = [(socket.AF_INET, "0.0.0.0")]
    if socket.has_ipv6:
        families.append((socket.AF_INET6, "::"))
    return families


def check_master_port(plan: LaunchPlan) -> None:
    """On the master node, fail with LaunchError (71) if the master port is already taken.

    Other nodes and topologies without a fixed port have nothing to check.
    """
    topology = plan.topology
    port = topology.master_port
    if topology.node_rank != 0 or port is None:
        return
    for family, address in _wildcards():
        try:
            taken = port_taken(port, family, address)
        except OSError:  # this address family is not available here
            continue
        if taken:
            msg = (
                f"master port {port} is already in use on this host (the master node, "
                f"{topology.master_addr}); pick another with --master-port or "
                "MALAUNCH_MASTER_PORT, or stop the process listening on it"
            )
            raise LaunchError(msg)
