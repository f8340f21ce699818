"""Plan invariants any framework plugin can check (part of the ``malaunch.testing`` kit)."""

from __future__ import annotations

import json
import os
import warnings
from typing import List, Optional, Sequence

from malaunch.models import LaunchPlan, ProcessSpec
from malaunch.wording import plural

# --- Plan invariants ---------------------------------------------------------------------

CONTRACT_KEYS = {
    "role", "rank", "local_rank", "argv", "env", "cwd", "log_file", "service", "dirs", "cpus",
    "attempt_env", "error_file",
}  # fmt: skip


def _dense(values: Sequence[int], start: Optional[int] = None) -> bool:
    """Distinct consecutive integers (from ``start`` when given)."""
    ordered = sorted(values)
    first = ordered[0] if start is None else start
    return ordered == list(range(first, first + len(ordered)))


def _process_problems(index: int, spec: ProcessSpec) -> List[str]:
    where = f"processes[{index}] ({spec.role} rank {spec.rank})"
    problems = []
    if not spec.role:
        problems.append(f"{where}: empty role")
    if not spec.argv or not all(isinstance(a, str) for a in spec.argv) or not spec.argv[0]:
        problems.append(f"{where}: argv must be a non-empty list of str, got {spec.argv!r}")
    for key, value in spec.env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            problems.append(f"{where}: env key {key!r} is not a variable name")
        if not isinstance(value, str) or "\0" in value:
            problems.append(f"{where}: env[{key!r}] must be a str without NUL, got {value!r}")
    for field in ("cwd", "log_file", "error_file"):
        path = getattr(spec, field)
        if path is not None and not os.path.isabs(path):
            problems.append(f"{where}: {field} {path!r} is not absolute")
    for name in spec.attempt_env:
        if not name or "=" in name or "\0" in name:
            problems.append(f"{where}: attempt_env {name!r} is not a variable name")
    if spec.rank is not None and spec.rank < 0:
        problems.append(f"{where}: negative rank")
    return problems


def _group_problems(plan: LaunchPlan) -> List[str]:
    processes = plan.processes
    workers = [p for p in processes if not p.service]
    problems = []
    logs = [p.log_file for p in processes]
    if len(set(logs)) != len(logs):
        problems.append(f"log files are not distinct: {logs}")
    errors = [p.error_file for p in processes if p.error_file is not None]
    if len(set(errors)) != len(errors) or set(errors) & set(logs):
        problems.append(f"error files are not distinct (from each other and the logs): {errors}")
    ranks = [p.rank for p in processes if p.rank is not None]
    if len(set(ranks)) != len(ranks):
        problems.append(f"ranks are not unique: {ranks}")
    worker_ranks = [p.rank for p in workers if p.rank is not None]
    if worker_ranks and not _dense(worker_ranks):
        problems.append(f"worker ranks are not dense (consecutive): {sorted(worker_ranks)}")
    local = [p.local_rank for p in workers if p.local_rank is not None]
    if local and not _dense(local, start=0):
        problems.append(f"worker local ranks are not 0..{len(local) - 1}: {sorted(local)}")
    if processes and not workers and plan.topology.nnodes == 1:
        # With other nodes, their workers finish the job (a parameter-server node).
        problems.append("every process is a service: nothing would ever finish")
    identities = [(p.role, p.rank, p.local_rank) for p in processes if p.service]
    if len(set(identities)) != len(identities):
        problems.append(f"services are not distinct by role/rank/local rank: {identities}")
    return problems


def _json_problems(plan: LaunchPlan) -> List[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dumped = plan.to_json_dict()
    if caught:  # pydantic warns (and guesses) when a field holds the wrong type
        return [f"the plan does not serialise cleanly: {caught[0].message}"]
    problems = []
    if set(dumped) != {"framework", "topology", "processes"}:
        problems.append(f"plan JSON keys {sorted(dumped)} differ from the dry-run contract")
    for i, process in enumerate(dumped["processes"]):
        if set(process) != CONTRACT_KEYS:
            problems.append(f"processes[{i}] JSON keys {sorted(process)} differ from the contract")
    again = LaunchPlan.model_validate_json(json.dumps(dumped))
    if again != plan:
        problems.append("the plan does not survive a JSON dump and reload unchanged")
    return problems


def check_plan(plan: LaunchPlan) -> None:
    """Assert what every framework plugin's plan must satisfy; any plugin's tests can call it.

    Checked: at least one process and at least one non-service process; roles set; argv a
    non-empty list of str; env keys are variable names and values str; cwd and log files
    absolute, log files distinct; error files absolute and distinct, attempt variables
    variable names; ranks unique (services included), worker ranks consecutive,
    worker local ranks ``0..n-1``; services distinct by (role, rank, local rank); the plan's
    JSON has exactly the dry-run contract's keys and reloads to an equal plan.

    :raises AssertionError: listing every problem found.
    """
    problems = [] if plan.framework else ["empty framework name"]
    if not plan.processes:
        problems.append("the plan has no processes")
    for index, spec in enumerate(plan.processes):
        problems.extend(_process_problems(index, spec))
    problems.extend(_group_problems(plan))
    problems.extend(_json_problems(plan))
    if problems:
        lines = "\n  ".join(problems)
        broken = plural(len(problems), "invariant")
        msg = f"plan of framework {plan.framework!r} breaks {broken}:\n  {lines}"
        raise AssertionError(msg)
