"""Where am I in the job? ``malaunch.context`` for training scripts.

::

    from malaunch import context

    if context.is_main:
        print(f"{context.world_size} ranks, datasets: {context.datasets}")
    device = context.device  # this process's device index inside the container, or None

The module attributes (``rank``, ``local_rank``, ``world_size``, ``node_rank``, ``nnodes``,
``role``, ``device``, ``device_id``, ``master_addr``, ``master_port``, ``job_id``,
``datasets``, ``dataset``, ``cached_dataset``, ``result_dir``, ``model_dir``, ``framework``,
``restart_count``, ``source``, ``is_main``) are computed from ``os.environ`` *each time they
are read* (PEP 562 module ``__getattr__``), so a test or a script that changes the environment
sees the change. :func:`current` returns the same values as one immutable :class:`Context`.

Values come from, in order:

1. ``MALAUNCH_CONTEXT``, the JSON malaunch gives every process it starts;
2. what other launchers set: torchrun (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ...), msrun
   (``MS_ROLE``, ``MS_NODE_ID``, ``MS_WORKER_NUM``, ...), Ascend scripts (``RANK_ID``,
   ``RANK_SIZE``, ``DEVICE_ID``), Kubeflow/Volcano ``TF_CONFIG``;
3. a single process: rank 0 of 1, role ``worker``.

Data paths come from ``MALAUNCH_CONTEXT`` or else straight from ``DATASET_MAP``, ``DATASET``,
``CACHED_DATASET``, ``RESULT`` and ``MODEL``. A malformed ``MALAUNCH_CONTEXT`` (or fallback
variable) raises ``ValueError`` naming the variable.

This module imports only the standard library (no pydantic, click or the rest of malaunch):
importing it, and calling :func:`heartbeat` (for ``--hang-timeout``), cost almost nothing.
"""

from __future__ import annotations

import json
import os
import time

# ``typing`` is only needed by type checkers: importing it would double this module's import
# time on Python 3.9 (mypy treats any name TYPE_CHECKING as true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional

CONTEXT_VAR = "MALAUNCH_CONTEXT"
MS_ROLES = {"MS_SCHED": "scheduler", "MS_WORKER": "worker", "MS_PSERVER": "server"}
TF_TRAINERS = ("chief", "master", "worker")

# name -> (JSON type, may be null, default). The order is the order of as_dict().
FIELDS = {
    "rank": (int, True, 0),
    "local_rank": (int, True, 0),
    "world_size": (int, False, 1),
    "node_rank": (int, False, 0),
    "nnodes": (int, False, 1),
    "role": (str, False, "worker"),
    "device": (int, True, None),
    "device_id": (int, True, None),
    "master_addr": (str, False, "127.0.0.1"),
    "master_port": (int, True, None),
    "job_id": (str, True, None),
    "datasets": (dict, False, {}),
    "dataset": (str, True, None),
    "cached_dataset": (str, True, None),
    "result_dir": (str, True, None),
    "model_dir": (str, True, None),
    "framework": (str, True, None),
    "restart_count": (int, False, 0),
    "source": (str, False, "default"),
}


class Context:
    """This process's place in the job (immutable). ``rank``/``local_rank`` are None for
    service processes (parameter servers, the MindSpore scheduler), which have no rank.

    A small slotted class rather than a NamedTuple or dataclass: both would import modules
    (typing, inspect) that cost more than the rest of this module together.
    """

    __slots__ = tuple(FIELDS)
    rank: Optional[int]
    local_rank: Optional[int]
    world_size: int
    node_rank: int
    nnodes: int
    role: str
    device: Optional[int]
    device_id: Optional[int]
    master_addr: str
    master_port: Optional[int]
    job_id: Optional[str]
    datasets: Dict[str, str]
    dataset: Optional[str]
    cached_dataset: Optional[str]
    result_dir: Optional[str]
    model_dir: Optional[str]
    framework: Optional[str]
    restart_count: int
    source: str

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(FIELDS))
        if unknown:
            msg = f"Context has no field {unknown[0]!r}"
            raise TypeError(msg)
        for name, (_kind, _nullable, default) in FIELDS.items():
            value = values.get(name, default)
            object.__setattr__(self, name, dict(value) if isinstance(value, dict) else value)

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"Context is immutable: cannot set {name!r}"
        raise AttributeError(msg)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Context) and self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]  # holds a dict: equal by value, not hashable

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in FIELDS)
        return f"Context({fields})"

    @property
    def is_main(self) -> bool:
        """True on global rank 0: the process that should log, save and evaluate."""
        return self.rank == 0

    def as_dict(self) -> Dict[str, Any]:
        """The context as a plain dict (with ``is_main``), e.g. for ``json.dumps``."""
        values = {name: getattr(self, name) for name in FIELDS}
        return {**values, "datasets": dict(self.datasets), "is_main": self.is_main}


def _bad(variable: str, problem: str) -> ValueError:
    return ValueError(f"malaunch.context: environment variable {variable}: {problem}")


def _env_int(env: Mapping[str, str], name: str) -> Optional[int]:
    value = env.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise _bad(name, f"expected an integer, got {value!r}") from None


def _check_field(name: str, value: Any) -> None:
    expected, nullable, _default = FIELDS[name]
    if value is None and nullable:
        return
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    if expected is dict and ok:
        ok = all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    if not ok:
        raise _bad(CONTEXT_VAR, f"field {name!r} has {value!r}, expected {expected.__name__}")


def _from_context_var(raw: str, env: Mapping[str, str]) -> Context:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise _bad(CONTEXT_VAR, f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _bad(CONTEXT_VAR, f"expected a JSON object, got {type(data).__name__}")
    # Unknown keys are ignored so a script keeps working under a newer launcher.
    values = {name: data[name] for name in FIELDS if name in data}
    for name, value in values.items():
        _check_field(name, value)
    values.setdefault("source", "malaunch")
    if data.get("agent") == "torchrun":
        # Started by a torchrun agent that malaunch started (torch_ddp delegate mode): the
        # context is the agent's; this worker's own rank is in torchrun's variables.
        worker = _from_torchrun(env)
        if worker is not None:
            del worker["source"]
            values.update(worker, role="worker", **_agent_device(data, worker["local_rank"]))
    values["restart_count"] = _env_int(env, "MALAUNCH_RESTART_COUNT") or 0
    return Context(**values)


def _agent_device(data: Dict[str, Any], local_rank: Optional[int]) -> Dict[str, Any]:
    """device / device_id of a torchrun worker from the agent's ``local_devices`` list."""
    devices: Any = data.get("local_devices")
    try:
        local_index, device_id = devices[local_rank]
    except (TypeError, IndexError, ValueError):
        return {"device": local_rank, "device_id": None}
    if not isinstance(local_index, int) or not isinstance(device_id, int):
        raise _bad(CONTEXT_VAR, f"local_devices: expected [index, id] pairs, got {devices!r}")
    return {"device": local_index, "device_id": device_id}


def _data_paths(env: Mapping[str, str]) -> Dict[str, Any]:
    raw = env.get("DATASET_MAP", "").strip()
    datasets: Dict[str, str] = {}
    if raw:
        try:
            datasets = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise _bad("DATASET_MAP", f"not valid JSON ({exc})") from None
        if not isinstance(datasets, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in datasets.items()
        ):
            raise _bad("DATASET_MAP", "expected a JSON object of dataset name to path")
    return {
        "datasets": datasets,
        "dataset": env.get("DATASET") or None,
        "cached_dataset": env.get("CACHED_DATASET") or None,
        "result_dir": env.get("RESULT") or None,
        "model_dir": env.get("MODEL") or None,
        "job_id": env.get("JOB_ID") or None,
    }


def _from_torchrun(env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    rank, world_size = _env_int(env, "RANK"), _env_int(env, "WORLD_SIZE")
    if rank is None or world_size is None:
        return None
    # Some operators set LOCAL_RANK to a list ("0,1,2,3") for a launcher to split: not ours.
    local = env.get("LOCAL_RANK", "")
    local_rank = _env_int(env, "LOCAL_RANK") if "," not in local else None
    node_rank = _env_int(env, "GROUP_RANK")
    nnodes = _env_int(env, "GROUP_WORLD_SIZE")
    return {
        "rank": rank,
        "world_size": world_size,
        "local_rank": local_rank,
        "device": local_rank,
        "node_rank": node_rank if node_rank is not None else _env_int(env, "NODE_RANK") or 0,
        "nnodes": nnodes or 1,
        "master_addr": env.get("MASTER_ADDR") or "127.0.0.1",
        "master_port": _env_int(env, "MASTER_PORT"),
        "source": "torchrun",
    }


def _from_msrun(env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    role = env.get("MS_ROLE")
    if not role:
        return None
    rank = _env_int(env, "RANK_ID")
    rank = rank if rank is not None else _env_int(env, "MS_NODE_ID")
    scheduler = role == "MS_SCHED"
    return {
        "rank": None if scheduler else rank,
        "local_rank": None,
        "world_size": _env_int(env, "MS_WORKER_NUM") or _env_int(env, "RANK_SIZE") or 1,
        "role": MS_ROLES.get(role, role),
        "master_addr": env.get("MS_SCHED_HOST") or "127.0.0.1",
        "master_port": _env_int(env, "MS_SCHED_PORT"),
        "source": "msrun",
    }


def _from_ascend(env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    rank, world_size = _env_int(env, "RANK_ID"), _env_int(env, "RANK_SIZE")
    if rank is None or world_size is None:
        return None
    device = _env_int(env, "DEVICE_ID")
    if device is None:
        device = _env_int(env, "ASCEND_DEVICE_ID")
    return {
        "rank": rank,
        "world_size": world_size,
        "local_rank": device,
        "device": device,
        "source": "ascend",
    }


def _tf_hosts(cluster: Mapping[str, Any], role: str) -> List[str]:
    hosts = cluster.get(role, [])
    if isinstance(hosts, dict):  # the "sparse" form lists only this worker: {"3": "host:port"}
        return [str(hosts[key]) for key in sorted(hosts, key=int)]
    if not isinstance(hosts, list):
        raise _bad("TF_CONFIG", f"cluster.{role}: expected a list of host:port")
    return [str(host) for host in hosts]


def _parse_tf_config(raw: str) -> Dict[str, Any]:
    try:
        config = json.loads(raw)
        task = config["task"]
        role, index = str(task["type"]), int(task.get("index", 0))
        cluster = config.get("cluster", {})
        trainers = {name: _tf_hosts(cluster, name) for name in TF_TRAINERS}
    except (ValueError, RecursionError) as exc:
        raise _bad("TF_CONFIG", f"not valid JSON with a task ({exc})") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise _bad(
            "TF_CONFIG", f"expected {{'cluster': {{...}}, 'task': {{...}}}} ({exc!r})"
        ) from None
    return {"role": role, "index": index, "cluster": cluster, "trainers": trainers}


def _from_tf_config(env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    raw = env.get("TF_CONFIG", "").strip()
    if not raw:
        return None
    parsed = _parse_tf_config(raw)
    role, index, trainers = parsed["role"], parsed["index"], parsed["trainers"]
    chiefs = len(trainers["chief"]) + len(trainers["master"])
    rank: Optional[int] = None  # ps and evaluator tasks have no training rank
    if role in ("chief", "master"):
        rank = index
    elif role == "worker":
        rank = chiefs + index
    world_size = chiefs + len(trainers["worker"])
    if isinstance(parsed["cluster"].get("worker"), dict):
        world_size = max(world_size, chiefs + index + 1)  # sparse form: a lower bound
    first = (trainers["chief"] + trainers["master"] + trainers["worker"] or [""])[0]
    host, _, port = first.rpartition(":")
    return {
        "rank": rank,
        "local_rank": 0 if rank is not None else None,
        "world_size": max(world_size, 1),
        "role": role,
        "master_addr": host.strip("[]") or "127.0.0.1",
        "master_port": int(port) if port.isdigit() else None,
        "source": "tf_config",
    }


_FALLBACKS: List[Callable[[Mapping[str, str]], Optional[Dict[str, Any]]]] = [
    _from_torchrun,
    _from_msrun,
    _from_ascend,
    _from_tf_config,
]


def from_environ(env: Mapping[str, str]) -> Context:
    """The context described by ``env`` (see the module docstring for the order)."""
    raw = env.get(CONTEXT_VAR, "").strip()
    if raw:
        return _from_context_var(raw, env)
    values = _data_paths(env)
    for fallback in _FALLBACKS:
        found = fallback(env)
        if found is not None:
            values.update(found)
            break
    values["restart_count"] = _env_int(env, "MALAUNCH_RESTART_COUNT") or 0
    return Context(**values)


def current() -> Context:
    """The context of this process, read from ``os.environ`` now."""
    return from_environ(os.environ)


_beat: Dict[str, Any] = {"pid": -1, "sock": None, "address": "", "payload": b"", "interval": 0}


def heartbeat() -> None:
    """Tell the launcher this rank is alive (``--hang-timeout``); cheap enough for every step.
    At most one call per ``MALAUNCH_HEARTBEAT_INTERVAL`` s sends a datagram; outside malaunch
    or without ``--hang-timeout`` it does nothing, and it never raises."""
    beat, now = _beat, time.monotonic()
    if beat["pid"] != os.getpid():  # first call, or a forked child: set up its own socket
        _set_up_beat(beat, now)
    if beat["sock"] is not None and now - beat["last"] >= beat["interval"]:
        beat["last"] = now
        try:  # noqa: SIM105 (contextlib.suppress would cost an import in every rank)
            beat["sock"].sendto(beat["payload"], beat["address"])
        except OSError:
            pass  # a launcher that is gone is not the training script's problem


def _set_up_beat(beat: Dict[str, Any], now: float) -> None:
    beat.update(pid=os.getpid(), sock=None)
    raw = os.environ.get("MALAUNCH_HEARTBEAT", "")
    try:
        interval = max(0.0, float(os.environ.get("MALAUNCH_HEARTBEAT_INTERVAL", "1")))
        rank = current().rank if raw else None
    except ValueError:
        return
    if raw:
        import socket  # noqa: PLC0415 (start-up cost: only ranks of a watched job need it)

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        address = "\0" + raw[1:] if raw.startswith("@") else raw  # "@": abstract namespace
        beat.update(sock=sock, address=address, interval=interval, last=now - interval)
        beat["payload"] = str("" if rank is None else rank).encode()


def __getattr__(name: str) -> Any:
    """PEP 562: ``context.rank`` etc. are read from the environment at access time."""
    if name in FIELDS or name == "is_main":
        return getattr(current(), name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> List[str]:
    return sorted([*globals(), *FIELDS, "is_main"])
