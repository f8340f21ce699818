"""When a job has succeeded (SPEC §9, TensorFlow success): its success policy.

``all-workers``: every worker of the job has succeeded (then the services, parameter servers
and schedulers, are stopped). ``chief``: the chief has succeeded; the workers and parameter
servers still running are stopped and every launcher exits 0. That is TFJob's default, and
what TF2's ``ParameterServerStrategy`` needs, whose workers and parameter servers serve in
``server.join()`` forever while the chief (the coordinator) trains. Without
``--success-policy``, a job whose cluster has a chief uses ``chief``, any other
``all-workers``. Every node derives the same policy from what the job shares (its topology and
the option), so node 0's coordinator and the others agree without telling each other.
"""

from __future__ import annotations

from typing import Optional

from malaunch.errors import UsageError
from malaunch.models import Topology

CHIEF = "chief"
ALL_WORKERS = "all-workers"
POLICIES = (CHIEF, ALL_WORKERS)
CHIEF_ROLE = "chief"  # the chief task's role (TF_CONFIG's "master", its legacy name, is read so)


def has_chief(topology: Topology) -> bool:
    """The cluster names a chief: a ``chief`` role (``TF_CONFIG``'s ``chief`` or ``master``,
    ``TF_CHIEF_HOSTS``) or a node of that role (a ``chief`` task of a Volcano job)."""
    if topology.roles.get(CHIEF_ROLE):
        return True
    return any(node.role == CHIEF_ROLE for node in topology.nodes)


def success_policy(topology: Topology, requested: Optional[str]) -> str:
    """``--success-policy``, else ``chief`` when the cluster has one, else ``all-workers``.

    :raises UsageError: ``chief`` was asked for and the cluster has none.
    """
    if requested is None:
        return CHIEF if has_chief(topology) else ALL_WORKERS
    if requested not in POLICIES:
        msg = f"--success-policy {requested!r}: expected one of {', '.join(POLICIES)}"
        raise UsageError(msg)
    if requested == CHIEF and not has_chief(topology):
        roles = ", ".join(topology.roles) or "none"
        msg = (
            f"--success-policy chief: the cluster has no chief (topology source "
            f"{topology.source!r}, roles: {roles}); use all-workers"
        )
        raise UsageError(msg)
    return requested
