"""Never silently alone: refusals of ``--topology auto`` (platform conventions §9, §10).

Two mistakes end in a job that trains alone and says nothing, so ``auto`` refuses both with
exit 65 and one line:

- **A nested launch.** ``malaunch`` run inside a worker that malaunch (``MALAUNCH_CONTEXT``)
  or a framework's own launcher started would start a second set of ranks under one that
  already has its place in a job. Each framework plugin declares its launcher's variables
  (``Framework.launcher_vars``: torch_ddp declares torchrun's ``TORCHELASTIC_RUN_ID`` and
  ``GROUP_RANK``); the pipeline passes them in.
- **Alone in a job.** No source recognised the environment, yet it shows a distributed job:
  ``WORLD_SIZE`` above 1, a node ``RANK``, a ``MASTER_ADDR`` that is not this machine,
  Kubeflow's ``PET_*``, a Volcano host list of several hosts, MPI, PMIx or Slurm task counts and
  ranks, a remote MindSpore scheduler, a MindX ``LOCAL_RANK`` list. The message names what it
  saw and the ``--topology`` source that reads it *for what it is*, or says that none does.

``WORLD_SIZE``, ``RANK`` and ``MASTER_ADDR`` mean different things to each platform, so the
source they point at depends on what else is set (see :func:`torch_reader`): naming a source
that reads ``WORLD_SIZE`` as a node count where it counts processes would start 16 nodes of
one process where there are 2 of 8.

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
from malaunch.topology import envparse, kubeflow
from malaunch.wording import listing

# The source ``auto`` falls back to (malaunch.topology.local, registered by name like any other).
FALLBACK_SOURCE = "local"
# What malaunch itself gives every worker, and who that is, for the nested-launch message;
# frameworks' launchers add theirs (Framework.launcher_vars).
NESTED_VARS = (("MALAUNCH_CONTEXT", "malaunch worker"),)
VC_TASK_VAR = re.compile(r"VC_(?P<task>[A-Z0-9_]+)_(?P<kind>HOSTS|NUM)")
SHOWN_SIGNS = 6  # how many signs the message names before "... (N more)"
SHOWN_VALUE = 40  # characters of a value the message keeps
LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")
# Torch-style variables: what reads them depends on the rest of the environment (torch_reader).
TORCH_VARS = ("WORLD_SIZE", "RANK", "MASTER_ADDR")
TORCH = "<torch>"  # in a rule below: the source torch_reader finds
# What a built-in source needs to read bare torch-style variables, for the refusal.
POD_NEEDS = (
    "as they are: kubeflow needs PET_NNODES and mindx-pytorch LOCAL_WORLD_SIZE, both taking "
    "RANK as this node's rank"
)


@dataclasses.dataclass(frozen=True)
class Sign:
    """One variable that shows a distributed job, and the source that reads it (if any)."""

    name: str
    value: str
    source: Optional[str]

    def shown(self) -> str:
        return f"{self.name}={clip(self.value)}"


def clip(value: str) -> str:
    """``value`` cut to ``SHOWN_VALUE`` characters for a message."""
    return value if len(value) <= SHOWN_VALUE else value[:SHOWN_VALUE] + "..."


def check_not_nested(env: Mapping[str, str], declared: Sequence[Tuple[str, str]] = ()) -> None:
    """Refuse to run inside a malaunch worker, or one a framework's launcher started:
    ``declared`` lists (variable, who sets it), as :meth:`PluginSet.launcher_vars` gives."""
    seen: List[Tuple[str, str]] = []
    for name, who in (*NESTED_VARS, *declared):
        if envparse.get(env, name) is not None and name not in (n for n, _ in seen):
            seen.append((name, who))
    if not seen:
        return
    names = listing([name for name, _ in seen])
    verb = "is" if len(seen) == 1 else "are"
    who = seen[0][1]
    msg = (
        f"nested launch: {names} {verb} set, so this runs inside a {who} that already "
        "has its rank; run the command itself there, or start a separate job on purpose "
        "with --topology local"
    )
    raise TopologyError(msg)


def _above(value: str, limit: int) -> bool:
    """A count above ``limit``; a value that is not a plain count is no proof of being alone."""
    text = value.strip()
    return not is_plain_int(text) or int(text) > limit


def _count_signs(env: Mapping[str, str], torch: Optional[str]) -> List[Sign]:
    """Counts of processes, tasks or nodes above 1, and ranks above 0."""
    rules: Sequence[Tuple[str, int, Optional[str]]] = (
        ("WORLD_SIZE", 1, TORCH),
        ("RANK", 0, TORCH),
        # Lightning, Azure ML and some torchrun forks: a node rank no built-in source reads.
        ("NODE_RANK", 0, None),
        ("GROUP_WORLD_SIZE", 1, None),  # torchrun's node count (GROUP_RANK is a nested launch)
        ("MA_NUM_HOSTS", 1, "volcano"),
        ("OMPI_COMM_WORLD_SIZE", 1, None),
        ("PMI_SIZE", 1, None),
        # PMIx (Open MPI 5, srun --mpi=pmix) passes only a rank; the size is asked for at run time.
        ("PMIX_RANK", 0, None),
        ("SLURM_NTASKS", 1, "slurm"),
        ("SLURM_NPROCS", 1, "slurm"),
        ("SLURM_PROCID", 0, "slurm"),
        ("SLURM_NNODES", 1, "slurm"),
        ("SLURM_JOB_NUM_NODES", 1, "slurm"),
        ("MS_WORKER_NUM", 1, "mindx"),
        ("CM_WORKER_SIZE", 1, "mindx-tensorflow"),
    )
    signs = []
    for name, limit, source in rules:
        value = envparse.get(env, name)
        if value is not None and _above(value, limit):
            signs.append(Sign(name, value, torch if source == TORCH else source))
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


def _is_list(value: Optional[str]) -> bool:
    return value is not None and "," in value


def _one_process(env: Mapping[str, str]) -> Optional[str]:
    """``LOCAL_RANK`` when it is one process's (a launcher's worker), not a MindX pod's list.

    MindX gives a pod ``LOCAL_RANK=0,1,...,n-1``: ``0`` alone only with ``LOCAL_WORLD_SIZE=1``.
    """
    local_rank = envparse.get(env, "LOCAL_RANK")
    if local_rank is None or not is_plain_int(local_rank):
        return None
    if local_rank == "0" and envparse.get(env, "LOCAL_WORLD_SIZE") == "1":
        return None
    return local_rank


def _older_pytorchjob(env: Mapping[str, str], lookup: Callable[[], Tuple[str, ...]]) -> bool:
    """A pod of a PyTorchJob whose operator set no ``PET_*`` (``WORLD_SIZE`` counts pods there).

    Its workers' ``MASTER_ADDR`` names the master Service (``<job>-master-0``, as Volcano's
    pytorch plugin does with a domain); the master pod itself got ``localhost``, and its
    ``HOSTNAME`` is the master's name.
    """
    master = envparse.get(env, "MASTER_ADDR")
    if master is None:
        return False
    if kubeflow.is_v1_master(master):
        return True
    hostname = envparse.get(env, "HOSTNAME")
    return (
        hostname is not None
        and kubeflow.is_v1_master(hostname.split(".", 1)[0])
        and is_local(master, lookup)
    )


def torch_reader(
    env: Mapping[str, str], lookup: Callable[[], Tuple[str, ...]] = this_host_addresses
) -> Tuple[Optional[str], str]:
    """(the source that reads ``WORLD_SIZE``/``RANK``/``MASTER_ADDR`` right, or None and why).

    - one process's ``LOCAL_RANK``: another launcher's worker; no source reads a process's ranks;
    - a ``LOCAL_RANK`` list or ``LOCAL_WORLD_SIZE``: a MindX pod, whose ``WORLD_SIZE`` counts
      processes (``kubeflow`` would read it as nodes): ``mindx-pytorch``;
    - an older PyTorchJob's master name: ``kubeflow``, which reads ``WORLD_SIZE`` as nodes
      without ``PET_NNODES`` (other ``PET_*`` do not change that, so they do not count here);
    - else nothing built in: a hand-written environment, or a platform only a plugin knows.
    """
    local_rank = _one_process(env)
    if local_rank is not None:
        why = (
            f"as they are: with LOCAL_RANK={clip(local_rank)} they are one "
            "process's, as another launcher gives its workers"
        )
        return None, why
    if _is_list(envparse.get(env, "LOCAL_RANK")) or envparse.get(env, "LOCAL_WORLD_SIZE"):
        return "mindx-pytorch", ""
    if _older_pytorchjob(env, lookup):
        return kubeflow.SOURCE, ""
    return None, POD_NEEDS


def _scheduler_signs(env: Mapping[str, str], lookup: Callable[[], Tuple[str, ...]]) -> List[Sign]:
    """A MindSpore worker's role next to a scheduler on another machine (msrun-style, or an
    AscendJob pod short of ``MS_WORKER_NUM``, which the ``mindx`` source then asks for)."""
    role = envparse.get(env, "MS_ROLE")
    host = envparse.get(env, "MS_SCHED_HOST")
    if role is None or host is None or is_local(host, lookup):
        return []
    return [Sign("MS_ROLE", role, "mindx"), Sign("MS_SCHED_HOST", host, "mindx")]


def job_signs(
    env: Mapping[str, str], lookup: Callable[[], Tuple[str, ...]] = this_host_addresses
) -> List[Sign]:
    """Every sign of a distributed job in ``env``, in a fixed order."""
    torch, _ = torch_reader(env, lookup)
    signs = _count_signs(env, torch)
    local_rank = envparse.get(env, "LOCAL_RANK")
    if _is_list(local_rank):
        signs.append(Sign("LOCAL_RANK", env["LOCAL_RANK"], "mindx-pytorch"))
    master = envparse.get(env, "MASTER_ADDR")
    if master is not None and not is_local(master, lookup):
        signs.append(Sign("MASTER_ADDR", master, torch))
    signs += _scheduler_signs(env, lookup)
    signs += [
        Sign(name, env[name], kubeflow.SOURCE)
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
    seen = signs[:SHOWN_SIGNS]
    shown = ", ".join(sign.shown() for sign in seen)
    if len(signs) > SHOWN_SIGNS:
        shown += f", ... ({len(signs) - SHOWN_SIGNS} more)"
    msg = (
        f"no topology source matched, but this environment shows a distributed job ({shown}): "
        f"{_advice(env, signs, seen, lookup)}, or run alone on purpose with --topology local"
    )
    raise TopologyError(msg)


def _advice(
    env: Mapping[str, str],
    signs: Sequence[Sign],
    seen: Sequence[Sign],
    lookup: Callable[[], Tuple[str, ...]],
) -> str:
    """The sources that read the signs, and what no built-in source reads (of those shown)."""
    sources = list(dict.fromkeys(sign.source for sign in signs if sign.source))
    unread = list(dict.fromkeys(sign.name for sign in seen if sign.source is None))
    # Why the torch-style variables are unread, and what would read them, when that helps.
    why = torch_reader(env, lookup)[1] if set(unread) & set(TORCH_VARS) else ""
    why = f" {why}" if why else ""
    if not sources:
        return f"no built-in source reads these{why}; name a plugin's source with --topology"
    advice = "name its source with " + " or ".join(f"--topology {source}" for source in sources)
    if unread:
        advice += f" (no built-in source reads {', '.join(unread)}{why})"
    return advice
