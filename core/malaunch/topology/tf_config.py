"""``TF_CONFIG`` (Kubeflow TFJob, Volcano's tensorflow plugin).

``{"cluster": {"<role>": ["host:port", ...]}, "task": {"type": ..., "index": ...},
"environment": "cloud"}``. Roles may be missing; ``master`` is the legacy name of ``chief``;
``environment`` is optional (Volcano leaves it out). With Kubeflow's dynamic workers a role is
an *object* ``{"<index>": "host:port"}`` holding only some tasks (the "sparse" form: normally
``cluster.worker`` with only this worker). The topology then keeps just the tasks it knows:
``roles`` lists the known addresses, ranks are the real task indices, and the world size counts
only the listed tasks, so it is a lower bound.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, NoReturn, Tuple

from malaunch.errors import TopologyError
from malaunch.models import ResolveOptions, Task, Topology
from malaunch.numbers import MAX_NODES, is_plain_int
from malaunch.topology import envparse
from malaunch.topology.jsonvar import load_json
from malaunch.topology.tf_ps import RoleMap, build_topology, check_distinct
from malaunch.wording import plural

SOURCE = "tf-config"
VAR = "TF_CONFIG"
LEGACY_CHIEF = "master"
# (role, task index) -> the task's JSON path (``cluster.worker[1]``), for messages.
Paths = Dict[Tuple[str, int], str]


def detect(env: Mapping[str, str]) -> bool:
    """``TF_CONFIG`` is set."""
    return envparse.get(env, VAR) is not None


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """The cluster of ``TF_CONFIG``, seen from its ``task``."""
    del options  # one process per task: nothing to choose
    doc = _load(env.get(VAR, ""))
    paths: Paths = {}
    roles = _cluster(doc.get("cluster"), paths)
    check_distinct(roles, lambda role, index: paths[role, index], prefix=f"{VAR}: ")
    task = _task(doc.get("task"), roles)
    environment = doc.get("environment")
    if environment is not None and not isinstance(environment, str):
        _fail(f"environment: expected a string, got {_shown(environment)}")
    unlisted = None
    if task.role not in roles:
        # Old TFJob code left the evaluator out of the cluster; nobody connects to it, so its
        # own address only labels the node.
        unlisted = envparse.get(env, "HOSTNAME") or "localhost"
    return build_topology(SOURCE, roles, task, env, unlisted_host=unlisted)


def _fail(detail: str) -> NoReturn:
    raise TopologyError(f"{VAR}: {detail}")


def _shown(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _load(raw: str) -> Dict[str, Any]:
    if not raw.strip():
        msg = f"{VAR} is empty or not set: expected a JSON object"
        raise TopologyError(msg)
    doc = load_json({VAR: raw}, VAR)
    if not isinstance(doc, dict):
        _fail(f"expected a JSON object, got {_shown(doc)}")
    return dict(doc)


def _cluster(cluster: object, paths: Paths) -> RoleMap:
    """The roles of ``cluster``; ``paths`` gets the JSON path of every task, for messages."""
    if cluster is None:
        _fail('cluster: missing (expected {"<role>": ["host:port", ...], ...})')
    if not isinstance(cluster, dict) or not cluster:
        _fail(f'cluster: expected an object of role to "host:port" list, got {_shown(cluster)}')
    if "chief" in cluster and LEGACY_CHIEF in cluster:
        _fail("cluster: has both chief and master (the legacy name of chief)")
    roles: RoleMap = {}
    for name, entries in cluster.items():
        role = "chief" if name == LEGACY_CHIEF else name
        roles[role] = _role_tasks(f"cluster.{name}", entries, role, paths)
    return roles


def _role_tasks(path: str, entries: object, role: str, paths: Paths) -> Dict[int, Tuple[str, int]]:
    """A role's addresses by task index: a list, or the sparse ``{"<index>": addr}`` object."""
    if isinstance(entries, list):
        indexed = [(f"{path}[{i}]", i, addr) for i, addr in enumerate(entries)]
    elif isinstance(entries, dict):
        indexed = _sparse(path, entries)
    else:
        _fail(f'{path}: expected a list of "host:port" (or an object), got {_shown(entries)}')
    tasks: Dict[int, Tuple[str, int]] = {}
    for where, index, addr in indexed:
        if not isinstance(addr, str):
            _fail(f'{where}: expected "host:port", got {_shown(addr)}')
        tasks[index] = envparse.split_host_port(addr.strip(), f'{VAR}: {where} "{addr}"')
        paths[role, index] = where
    return tasks


def _sparse(path: str, entries: Dict[Any, object]) -> List[Tuple[str, int, object]]:
    """(JSON path, task index, address) of each key; "1" and "01" are one index, refused."""
    indexed: List[Tuple[str, int, object]] = []
    keys: Dict[int, str] = {}
    for key, addr in entries.items():
        if not (isinstance(key, str) and is_plain_int(key) and int(key) <= MAX_NODES):
            _fail(f"{path}: key {_shown(key)} is not a task index")
        if int(key) in keys:
            _fail(f"{path}: keys {_shown(keys[int(key)])} and {_shown(key)} are one task index")
        keys[int(key)] = key
        indexed.append((f"{path}[{_shown(key)}]", int(key), addr))
    return indexed


def _task(task: object, roles: RoleMap) -> Task:
    if not isinstance(task, dict):
        got = "missing" if task is None else f"got {_shown(task)}"
        _fail(f'task: expected {{"type": "<role>", "index": <int>}}, {got}')
    role, index = task.get("type"), task.get("index", 0)
    if not isinstance(role, str) or not role:
        _fail(f"task.type: expected a role name, got {_shown(role)}")
    role = "chief" if role == LEGACY_CHIEF else role
    if isinstance(index, str) and is_plain_int(index):
        index = int(index)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_NODES:
        _fail(f"task.index: expected a non-negative integer, got {_shown(index)}")
    if role in roles and index not in roles[role]:
        _fail(_index_problem(role, index, roles[role]))
    if role not in roles and role != "evaluator":
        known = ", ".join(sorted(roles))
        _fail(f'task.type: "{role}" is not a role of cluster ({known})')
    return Task(role=role, index=index)


def _index_problem(role: str, index: int, tasks: Dict[int, Tuple[str, int]]) -> str:
    if sorted(tasks) == list(range(len(tasks))):
        return f"task.index: {index} is out of range for {role} ({plural(len(tasks), 'task')})"
    listed = ", ".join(str(i) for i in sorted(tasks))
    return f"task.index: {index} is not listed in the sparse cluster.{role} (indices: {listed})"
