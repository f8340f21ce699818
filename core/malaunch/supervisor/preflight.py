"""Checks before anything starts: a taken master port or job port fails now, with a clear
message, instead of as a rendezvous timeout in every rank minutes later."""

from __future__ import annotations

import socket
from typing import List, Optional, Tuple

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


def check_ports(plan: LaunchPlan, job_port: Optional[int] = None) -> None:
    """On node 0, fail with LaunchError (71) if the master port or the job channel's port is
    already taken (or both are the same port). Other nodes have nothing to check."""
    topology = plan.topology
    if topology.node_rank != 0:
        return
    port = topology.master_port
    if job_port is not None and job_port == port:
        msg = f"the job port and the master port are both {port}: give --job-port another one"
        raise LaunchError(msg)
    if port is not None:
        _check(
            port,
            f"master port {port}",
            "--master-port or MALAUNCH_MASTER_PORT",
            topology.master_addr,
        )
    if job_port is not None:
        _check(
            job_port,
            f"job port {job_port}",
            "--job-port or MALAUNCH_JOB_PORT",
            topology.master_addr,
        )


def _check(port: int, what: str, option: str, master: str) -> None:
    for family, address in _wildcards():
        try:
            taken = port_taken(port, family, address)
        except OSError:  # this address family is not available here
            continue
        if taken:
            msg = (
                f"{what} is already in use on this host (the master node, {master}); "
                f"pick another with {option}, or stop the process listening on it"
            )
            raise LaunchError(msg)
