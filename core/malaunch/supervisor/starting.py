"""Starting an attempt's processes on this node, all of a plan or one again (``simulate``'s
``--replace-lost`` restarts a node launcher that died, as a kubelet restarts a container)."""

from __future__ import annotations

import os
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.errors import LaunchError
from malaunch.events import Clock
from malaunch.hang.heartbeat import HeartbeatSocket
from malaunch.hang.watch import HangSettings
from malaunch.log import logger
from malaunch.models import ProcessSpec, Topology
from malaunch.supervisor.containment import Containment
from malaunch.supervisor.dedup import Deduper, DedupRelay, member
from malaunch.supervisor.options import SuperviseOptions
from malaunch.supervisor.output import ConsoleWriter, LineRelay, console_prefix, describe_all
from malaunch.supervisor.reaper import Reaper
from malaunch.supervisor.signals import SignalWakeup
from malaunch.supervisor.spawn import Child, make_child_setup, spawn
from malaunch.wording import plural


def say_started(number: int, children: Sequence[Child]) -> None:
    """``starting ranks 0-7 (8 processes)``, ``attempt 1: starting ...``: while the ranks
    import torch, the console would otherwise say nothing. Said once they are spawned: the
    logger's first message costs ~70 ms (:mod:`malaunch.log`)."""
    attempt = f"attempt {number}: " if number > 0 else ""
    count = plural(len(children), "process")
    logger.info(f"{attempt}starting {describe_all([c.spec for c in children])} ({count})")


def start_processes(
    specs: Sequence[ProcessSpec],
    *,
    number: int,
    environ: Optional[Mapping[str, str]],
    wakeup: SignalWakeup,
    containment: Containment,
    reaper: Reaper,
    relay_of: Callable[[ProcessSpec], Optional[LineRelay]],
    clock: Clock,
    extra_env: Dict[str, str],
    append: Optional[bool] = None,
) -> Tuple[List[Child], Optional[LaunchError]]:
    """Start ``specs`` for attempt ``number`` with signals blocked (so that each child's
    set-up cannot be interrupted half-way); stop at the first that cannot be started and
    return its error beside the children started so far."""
    children: List[Child] = []
    base = dict(os.environ if environ is None else environ)
    with wakeup.blocked() as mask:
        setup = make_child_setup(os.getpid(), wakeup.handled, mask, containment.join_file)
        for spec in specs:
            try:
                child = spawn(
                    spec,
                    environ=base,
                    attempt=number,
                    setup=setup,
                    relay=relay_of(spec),
                    clock=clock,
                    extra_env=extra_env,
                    append=append,
                )
            except LaunchError as exc:
                return children, exc
            reaper.watch(child.pid)
            children.append(child)
    return children, None


def runtime_env(
    hang: Optional[HangSettings], heartbeat: Optional[HeartbeatSocket]
) -> Dict[str, str]:
    """What the launcher adds to every process at run time: the heartbeat socket's address
    and, with hang detection, faulthandler (the stack fallback where py-spy cannot read a
    rank)."""
    if hang is None or heartbeat is None:
        return {}
    return {**heartbeat.env(hang.beat_interval), "PYTHONFAULTHANDLER": "1"}


def relay_for(
    spec: ProcessSpec,
    topology: Topology,
    options: SuperviseOptions,
    console: ConsoleWriter,
    deduper: Optional[Deduper],
) -> LineRelay:
    """What copies a process's lines to the console (through the deduper with dedup)."""
    fields = {"node": topology.node_rank, "host": topology.this_node.host}
    if deduper is not None:
        return DedupRelay(member(spec, options.console_prefix, **fields), deduper)
    prefix = console_prefix(spec, options.console_prefix, **fields)
    return LineRelay(prefix, console, escape=not options.console_raw)
