"""``--cpu-bind``: each bound process's CPUs written into the plan (``ProcessSpec.cpus``).

Which processes are bound: the training processes, those with a rank that are not services,
in the plan's order (their local order). Services (the MindSpore scheduler, TensorFlow ps
tasks) are bound by no mode: they mostly wait on the network, and CPUs set aside for them
would be taken from the ranks, so they keep the launcher's own CPUs (``cpus`` None), as does
every process under ``none``.

The machine is read once per launcher, when the first plan is bound, and each message is
said once: a restart's new plan is bound again without a second warning.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, List, Mapping, Optional, Set

from malaunch.cpus import assign, npusmi
from malaunch.cpus.cpulist import CpuBindMode, format_cpulist
from malaunch.cpus.machine import Machine, read_machine
from malaunch.log import logger
from malaunch.models import LaunchPlan, ProcessSpec
from malaunch.wording import quoted

SHOWN_PROCESSES = 4  # processes named in the info line; the plan and the summary list all


@dataclasses.dataclass(frozen=True)
class CpuBindRequest:
    """What the command line asked for."""

    mode: CpuBindMode
    text: str = ""  # the value as given, for messages
    option: str = "--cpu-bind"  # or MALAUNCH_CPU_BIND: who to name in messages
    root: str = "/"  # --sysfs-root
    npu_smi: Optional[str] = None  # --npu-smi; None: npu-smi on PATH
    environ: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def culprit(self) -> str:
        """``--cpu-bind '0-3,4-7'``, how an error names the value."""
        return f"{self.option} {quoted(self.text)}"


def is_bound(spec: ProcessSpec) -> bool:
    """Whether ``--cpu-bind`` binds this process (a training process, not a service)."""
    return spec.rank is not None and not spec.service


def _device(plan: LaunchPlan, spec: ProcessSpec) -> Optional[int]:
    for device in plan.topology.this_node.devices:
        if device.rank == spec.rank:
            return device.device_id
    return None


class CpuBinder:
    """Binds each plan of one launch to CPUs as the request says."""

    def __init__(self, request: CpuBindRequest) -> None:
        self.request = request
        self._machine: Optional[Machine] = None
        self._npu_affinity: Dict[int, FrozenSet[int]] = {}
        self._said: Set[str] = set()

    def machine(self) -> Machine:
        """This machine as the mode needs it, read on first use."""
        if self._machine is None:
            numa = self.request.mode.name == "numa"
            machine = read_machine(self.request.root, devices=numa)
            if numa and not machine.gpus:
                affinity, problem = npusmi.read_affinity(self.request.npu_smi, self.request.environ)
                self._npu_affinity = affinity
                if problem is not None:
                    machine = dataclasses.replace(machine, problems=(*machine.problems, problem))
            self._machine = machine
        return self._machine

    def check(self) -> None:
        """Refuse, before any topology work, a LIST naming a CPU the launcher may not use."""
        if self.request.mode.name == "list":
            assign.check_lists(self.request.mode, self.machine().allowed, self.request.culprit)

    def bind(self, plan: LaunchPlan) -> LaunchPlan:
        """``plan`` with each process's ``cpus`` set (None where it is not bound).

        :raises UsageError: a LIST names a CPU the launcher may not use, or is too short.
        """
        places = [n for n, spec in enumerate(plan.processes) if is_bound(spec)]
        if self.request.mode.name == "none" or not places:
            return _with_cpus(plan, {})
        bound = [plan.processes[n] for n in places]
        assignment = self._assign(plan, bound)
        self._say(assignment, bound)
        return _with_cpus(plan, dict(zip(places, map(format_cpulist, assignment.cpus))))

    def _assign(self, plan: LaunchPlan, bound: List[ProcessSpec]) -> assign.Assignment:
        mode = self.request.mode
        machine = self.machine()
        if mode.name == "even":
            return assign.even(machine.allowed, len(bound))
        if mode.name == "list":
            return assign.from_list(mode, machine.allowed, len(bound), self.request.culprit)
        devices = [_device(plan, spec) for spec in bound]
        return assign.numa(machine, devices, self._npu_affinity)

    def _say(self, assignment: assign.Assignment, bound: List[ProcessSpec]) -> None:
        """One warning line for everything worth one, and one line naming the source."""
        name = self.request.mode.name
        head = f"{self.request.option} {'LIST' if name == 'list' else name}"
        parts = list(assignment.warnings)
        problems = self.machine().problems
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            parts.insert(0, f"cannot read {problems[0]}{more}")
            if assignment.round_robin:
                parts.insert(1, "NUMA nodes assigned round-robin by local rank")
            elif name != "numa":  # only the launcher's CPUs were read, from a test's root
                parts.insert(1, "the launcher's own affinity is used")
        if parts:
            self._once("warning", f"{head}: {'; '.join(parts)}")
        pairs = [
            f"rank {spec.rank}: {format_cpulist(cpus)}"
            for spec, cpus in zip(bound[:SHOWN_PROCESSES], assignment.cpus)
        ]
        if len(bound) > SHOWN_PROCESSES:
            pairs.append(f"... {len(bound) - SHOWN_PROCESSES} more in the plan and the summary")
        self._once("info", f"{head} ({assignment.source}): {', '.join(pairs)}")

    def _once(self, level: str, message: str) -> None:
        if message in self._said:
            return
        self._said.add(message)
        if level == "warning":
            logger.warning(message)
        else:
            logger.info(message)


def _with_cpus(plan: LaunchPlan, cpus: Mapping[int, str]) -> LaunchPlan:
    """``plan`` whose process number ``n`` has ``cpus[n]``, None for the others."""
    if not cpus and all(spec.cpus is None for spec in plan.processes):
        return plan
    processes = tuple(
        spec.model_copy(update={"cpus": cpus.get(n)}) for n, spec in enumerate(plan.processes)
    )
    return plan.model_copy(update={"processes": processes})
