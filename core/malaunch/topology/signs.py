"""Never silently alone: refusals of ``--topology auto`` (platform conventions §9, §10).

Two mistakes end in a job that trains alone and says nothing, so ``auto`` refuses both with
exit 65 and one line:

- **A nested launch.** ``malaunch`` run inside a worker that malaunch or torchrun started
  (``MALAUNCH_CONTEXT``, ``TORCHELASTIC_RUN_ID``, ``GROUP_RANK``) would start a second set of
  ranks under one that already has its place in a job.
- **Alone in a job.** No source recognised the environment, yet it shows a distributed job:
  ``WORLD_SIZE`` above 1, a node ``RANK``, a ``MASTER_ADDR`` that is not this machine,
  Kubeflow's ``PET_*``, a Volcano host list of several hosts, MPI or Slurm task counts above 1.
  The message names what it saw and the ``--topology`` source that reads it.

A named source (``--topology local`` included) is never refused: the user means it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import re
import socket
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from malaunch.errors import TopologyError
from malaunch.numbers import is_plain_int
from malaunch.topology import envparse

# The source ``auto`` falls back to (malaunch.topology.local, registered by name like any other).
FALLBACK_SOURCE = "local"
# Who sets each variable of a worker's environment, for the nested-launch message.
NESTED_VARS = (
    ("MALAUNCH_CONTEXT", "malaunch"),
    ("TORCHELASTIC_RUN_ID", "torchrun"),
    ("GROUP_RANK", "torchrun"),
)
VC_TASK_VAR = re.compile(r"VC_(?P<task>[A-Z0-9_]+)_(?P<kind>HOSTS|NUM)")
SHOWN_SIGNS = 6  # how many signs the message names before "... (N more)"
SHOWN_VALUE = 40  # characters of a value the message keeps
LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


@dataclasses.dataclass(frozen=True)
class Sign:
    """One variable that shows a distributed job, and the source that reads it (if any)."""

    name: str
    value: str
    source: Optional[str]

    def shown(self) -> str:
        value = self.value
        if len(value) > SHOWN_VALUE:
            value = value[:SHOWN_VALUE] + "..."
        return f"{self.name}={value}"


def check_not_nested(env: Mapping[str, str]) -> None:
    """Refuse to run inside a malaunch or torchrun worker."""
    seen = [(name, who) for name, who in NESTED_VARS if envparse.get(env, name) is not None]
    if not seen:
        return
    names = " and ".join(name for name, _ in seen)
    verb = "is" if len(seen) == 1 else "are"
    who = seen[0][1]
    msg = (
        f"nested launch: {names} {verb} set, so this runs inside a {who} worker that already "
        "has its rank; run the command itself there, or start a separate job on purpose "
        "with --topology local"
    )
    raise TopologyError(msg)


def _above(value: str, limit: int) -> bool:
    """A count above ``limit``; a value that is not a plain count is no proof of being alone."""
    text = value.strip()
    return not is_plain_int(text) or int(text) > limit


def _count_signs(env: Mapping[str, str]) -> List[Sign]:
    """Counts of processes, tasks or nodes above 1, and node ranks above 0."""
    rules: Sequence[Tuple[str, int, Optional[str]]] = (
        ("WORLD_SIZE", 1, "kubeflow"),
        ("RANK", 0, "kubeflow"),
        ("MA_NUM_HOSTS", 1, "volcano"),
        ("OMPI_COMM_WORLD_SIZE", 1, None),
        ("PMI_SIZE", 1, None),
        ("SLURM_NTASKS", 1, "slurm"),
        ("SLURM_NNODES", 1, "slurm"),
        ("SLURM_JOB_NUM_NODES", 1, "slurm"),
        ("MS_WORKER_NUM", 1, "mindx"),
        ("CM_WORKER_SIZE", 1, "mindx-tensorflow"),
    )
    signs = []
    for name, limit, source in rules:
        value = envparse.get(env, name)
        if value is not None and _above(value, limit):
            signs.append(Sign(name, value, source))
    return signs


def _volcano_signs(env: Mapping[str, str]) -> List[Sign]:
    """Volcano tasks of several pods: ``VC_<TASK>_HOSTS`` lists, ``VC_<TASK>_NUM`` counts."""
    signs = []
    for name in sorted(env):
        match = VC_TASK_VAR.fullmatch(name)
        value = envparse.get(env, name)
        if match is None or value is None:
            continue
        several = "," in value if match["kind"] == "HOSTS" else _above(value, 1)
        if several:
            source = "volcano" if match["task"] == "WORKER" else "volcano-tasks"
            signs.append(Sign(name, value, source))
    return signs


def this_host_addresses() -> Tuple[str, ...]:
    """This machine's host name and the addresses it resolves to (``/etc/hosts``, mostly)."""
    name = socket.gethostname()
    found = [name]
    with contextlib.suppress(OSError):
        found.extend(str(info[4][0]) for info in socket.getaddrinfo(name, None))
    return tuple(dict.fromkeys(found))


def is_local(host: str, lookup: Callable[[], Tuple[str, ...]] = this_host_addresses) -> bool:
    """``host`` is a loopback address, ``localhost`` or one of this machine's names."""
    plain = host.strip().strip("[]").lower()
    if plain in LOCAL_NAMES:
        return True
    with contextlib.suppress(ValueError):
        address = ipaddress.ip_address(plain)
        if address.is_loopback or address.is_unspecified:
            return True
    return plain in (name.lower() for name in lookup())


def job_signs(
    env: Mapping[str, str], lookup: Callable[[], Tuple[str, ...]] = this_host_addresses
) -> List[Sign]:
    """Every sign of a distributed job in ``env``, in a fixed order."""
    signs = _count_signs(env)
    master = envparse.get(env, "MASTER_ADDR")
    if master is not None and not is_local(master, lookup):
        signs.append(Sign("MASTER_ADDR", master, "kubeflow"))
    signs += [
        Sign(name, env[name], "kubeflow")
        for name in sorted(env)
        if name.startswith("PET_") and envparse.get(env, name) is not None
    ]
    return signs + _volcano_signs(env)


def refuse_alone(
    env: Mapping[str, str], lookup: Callable[[], Tuple[str, ...]] = this_host_addresses
) -> None:
    """Refuse the ``local`` fallback of ``auto`` where the environment shows a distributed job."""
    signs = job_signs(env, lookup)
    if not signs:
        return
    shown = ", ".join(sign.shown() for sign in signs[:SHOWN_SIGNS])
    if len(signs) > SHOWN_SIGNS:
        shown += f", ... ({len(signs) - SHOWN_SIGNS} more)"
    sources = list(dict.fromkeys(sign.source for sign in signs if sign.source))
    if sources:
        named = " or ".join(f"--topology {source}" for source in sources)
        advice = f"name its source with {named}"
    else:
        advice = "no built-in source reads these; name a plugin's source with --topology"
    msg = (
        f"no topology source matched, but this environment shows a distributed job ({shown}): "
        f"{advice}, or run alone on purpose with --topology local"
    )
    raise TopologyError(msg)
