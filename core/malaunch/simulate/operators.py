"""What the Kubernetes operators inject into each pod of a rendered job (conventions §6, §7).

Given the manifests ``malaunch render`` writes, :func:`inject` lists every pod the operator
would create with the environment its container gets: the manifest's own ``env`` (downward-API
fields filled in), ``HOSTNAME`` (the pod name), and what the controllers and plugins add:

- Volcano Job: ``env`` (``VC_TASK_INDEX``, ``VK_TASK_INDEX``), ``svc`` (``VC_<TASK>_HOSTS`` of
  ``<job>-<task>-<i>.<job>``, ``VC_<TASK>_NUM``), ``pytorch`` (``MASTER_ADDR`` = the master
  task's first pod, ``MASTER_PORT``, ``WORLD_SIZE`` = pods, ``RANK`` = 0 for the master, index
  + 1 for workers), ``tensorflow`` (``TF_CONFIG`` without ``environment``);
- Kubeflow PyTorchJob: ``MASTER_ADDR`` / ``PET_MASTER_ADDR`` = ``<job>-master-0``, the ports,
  ``WORLD_SIZE`` = pods x ``nprocPerNode``, ``RANK`` / ``PET_NODE_RANK``, ``PET_NNODES``,
  ``PET_NPROC_PER_NODE``; TFJob: ``TF_CONFIG`` of ``<job>-<type>-<i>.<namespace>.svc:<port>``;
- MindX AscendJob: for PyTorch ``MASTER_ADDR`` (the master Service's IP), ``MASTER_PORT``,
  ``RANK`` (the pod), ``WORLD_SIZE`` (NPUs x pods), ``LOCAL_WORLD_SIZE``, ``LOCAL_RANK`` (a list),
  ``MINDX_TASK_ID``, ``ASCEND_VISIBLE_DEVICES``; for MindSpore with a ``Scheduler``, ``MS_ROLE``
  (``MS_SCHED`` / ``MS_WORKER``), ``MS_SCHED_HOST`` (the scheduler's own pod IP on its pod, its
  Service's IP on the workers), ``MS_SCHED_PORT``, ``MS_NODE_RANK`` (the replica index),
  ``MS_LOCAL_WORKER`` and ``MS_WORKER_NUM`` (the workers' NPUs per pod, and x worker pods, on
  every pod), ``MS_SERVER_NUM=0``, ``NPU_POD``; for MindSpore workers only (the operator allows
  that up to 1 NPU in all) no variables but the completed rank table the operator writes into a
  mounted ConfigMap, one server per pod (``server_id`` the pod's UID, ``host_ip`` its node,
  ``container_ip`` the pod).

A :class:`Network` says how pods are reached: cluster DNS names and made-up addresses for a
round trip on paper, or plain addresses (this machine's loopback ones) for ``malaunch
simulate``, where no DNS resolves pod names.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from malaunch.render.crds import AscendJob, PyTorchJob, ReplicaSpec, TFJob, VolcanoJob
from malaunch.render.k8s import ConfigMap, K8sModel, PodTemplateSpec


def _pod_ip(number: int) -> str:
    return f"10.244.{number // 250}.{number % 250 + 2}"


def _node_ip(number: int) -> str:
    return f"198.18.{number // 250}.{number % 250 + 1}"


@dataclasses.dataclass(frozen=True)
class Network:
    """How pods are addressed; ``number`` is a pod's position in the manifest's order."""

    dns: bool = True
    pod_ip: Callable[[int], str] = _pod_ip
    node_ip: Callable[[int], str] = _node_ip
    service_ip: str = "10.96.0.10"  # the MindX master Service's cluster IP


@dataclasses.dataclass(frozen=True)
class Pod:
    """One pod the operator creates, and what its container finds."""

    name: str
    task: str
    index: int
    number: int
    env: Dict[str, str]
    files: Dict[str, str] = dataclasses.field(default_factory=dict)


Placed = Tuple[str, int, int, PodTemplateSpec]  # task, index in task, number, template


def _place(tasks: Sequence[Tuple[str, int, PodTemplateSpec]]) -> List[Placed]:
    placed: List[Placed] = []
    for task, replicas, template in tasks:
        placed += [(task, i, len(placed) + i, template) for i in range(replicas)]
    return placed


def _own_env(template: PodTemplateSpec, pod: str, number: int, net: Network) -> Dict[str, str]:
    """``HOSTNAME`` and the container's own ``env``, downward-API fields filled in."""
    fields = {"status.hostIP": net.node_ip(number), "status.podIP": net.pod_ip(number)}
    fields["metadata.name"] = pod
    env = {"HOSTNAME": pod}
    for var in template.spec.containers[0].env or ():
        if var.value is not None:
            env[var.name] = var.value
        elif var.value_from is not None and var.value_from.field_ref.field_path in fields:
            env[var.name] = fields[var.value_from.field_ref.field_path]
    return env


def _plugin_args(args: Sequence[str]) -> Dict[str, str]:
    return {k.lstrip("-"): v for k, _, v in (arg.partition("=") for arg in args)}


def _volcano(job: VolcanoJob, net: Network) -> List[Pod]:
    name = job.metadata.name or ""
    placed = _place([(t.name, t.replicas, t.template) for t in job.spec.tasks])
    hosts: Dict[str, List[str]] = {}
    for task, i, number, _ in placed:
        hosts.setdefault(task, []).append(
            f"{name}-{task}-{i}.{name}" if net.dns else net.pod_ip(number)
        )
    svc = {}
    for task, listed in hosts.items():
        key = task.upper().replace("-", "_")
        svc[f"VC_{key}_HOSTS"], svc[f"VC_{key}_NUM"] = ",".join(listed), str(len(listed))
    pods = []
    for task, i, number, template in placed:
        pod = f"{name}-{task}-{i}"
        env = {**_own_env(template, pod, number, net), "VK_TASK_INDEX": str(i)}
        env.update({"VC_TASK_INDEX": str(i), **svc})
        env.update(_volcano_pytorch(job, hosts, task, i) or {})
        env.update(_volcano_tensorflow(job, hosts, task, i) or {})
        pods.append(Pod(pod, task, i, number, env))
    return pods


def _volcano_pytorch(
    job: VolcanoJob, hosts: Dict[str, List[str]], task: str, index: int
) -> Optional[Dict[str, str]]:
    if "pytorch" not in job.spec.plugins:
        return None
    args = _plugin_args(job.spec.plugins["pytorch"])
    master, worker = args.get("master", "master"), args.get("worker", "worker")
    if master not in hosts or task not in (master, worker):
        return None  # the plugin does nothing without its master task
    return {
        "MASTER_ADDR": hosts[master][0],
        "MASTER_PORT": args.get("port", "23456"),
        "WORLD_SIZE": str(len(hosts[master]) + len(hosts.get(worker, []))),
        "RANK": str(index if task == master else len(hosts[master]) + index),
    }


def _volcano_tensorflow(
    job: VolcanoJob, hosts: Dict[str, List[str]], task: str, index: int
) -> Optional[Dict[str, str]]:
    if "tensorflow" not in job.spec.plugins or sum(len(h) for h in hosts.values()) == 1:
        return None
    port = _plugin_args(job.spec.plugins["tensorflow"]).get("port", "2222")
    cluster = {role: [f"{host}:{port}" for host in listed] for role, listed in hosts.items()}
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task, "index": index}})}


def _replicas(specs: Dict[str, ReplicaSpec], order: Sequence[str]) -> List[Placed]:
    known = [key for key in order if key in specs]
    return _place([(key.lower(), specs[key].replicas, specs[key].template) for key in known])


def _port(template: PodTemplateSpec, default: int) -> int:
    ports = template.spec.containers[0].ports or ()
    return ports[0].container_port if ports else default


def _pytorchjob(job: PyTorchJob, net: Network) -> List[Pod]:
    name = job.metadata.name or ""
    placed = _replicas(job.spec.pytorch_replica_specs, ("Master", "Worker"))
    nproc = job.spec.nproc_per_node or "1"
    master = f"{name}-master-0" if net.dns else net.pod_ip(0)
    port = str(_port(placed[0][3], 23456))
    pods = []
    for task, i, number, template in placed:
        pod = f"{name}-{task}-{i}"
        rank = str(i + 1 if task == "worker" else i)
        env = _own_env(template, pod, number, net)
        env.update({
            "PYTHONUNBUFFERED": "1", "MASTER_ADDR": master, "PET_MASTER_ADDR": master,
            "MASTER_PORT": port, "PET_MASTER_PORT": port, "RANK": rank, "PET_NODE_RANK": rank,
            "WORLD_SIZE": str(len(placed) * (int(nproc) if nproc.isdigit() else 1)),
            "PET_NPROC_PER_NODE": nproc, "PET_NNODES": str(len(placed)),
        })  # fmt: skip
        pods.append(Pod(pod, task, i, number, env))
    return pods


def _tfjob(job: TFJob, net: Network) -> List[Pod]:
    name, namespace = job.metadata.name or "", job.metadata.namespace or "default"
    placed = _replicas(job.spec.tf_replica_specs, ("Chief", "Master", "PS", "Worker", "Evaluator"))
    cluster: Dict[str, List[str]] = {}
    for task, i, number, template in placed:
        host = f"{name}-{task}-{i}.{namespace}.svc" if net.dns else net.pod_ip(number)
        cluster.setdefault(task, []).append(f"{host}:{_port(template, 2222)}")
    pods = []
    for task, i, number, template in placed:
        pod = f"{name}-{task}-{i}"
        config = {"cluster": cluster, "task": {"type": task, "index": i}, "environment": "cloud"}
        env = {**_own_env(template, pod, number, net), "TF_CONFIG": json.dumps(config)}
        pods.append(Pod(pod, task, i, number, env))
    return pods


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "malaunch:" + "/".join(parts)))


def _npus(template: PodTemplateSpec) -> int:
    resources = template.spec.containers[0].resources
    requests = (resources.requests if resources else None) or {}
    return sum(int(v) for k, v in requests.items() if k.startswith("huawei.com/Ascend"))


def _ascendjob(job: AscendJob, maps: Dict[str, ConfigMap], net: Network) -> List[Pod]:
    name = job.metadata.name or ""
    placed = _replicas(job.spec.replica_specs, ("Master", "Scheduler", "Chief", "Worker"))
    npus = _npus(placed[-1][3])  # the workers' (a MindSpore scheduler requests none)
    if (job.metadata.labels or {}).get("framework") == "mindspore":
        if "Scheduler" in job.spec.replica_specs:
            return _mindspore_pods(name, placed, npus, net)
        return _rank_table_pods(name, placed, npus, maps, net)
    port = str(_port(placed[0][3], 2222))
    master = net.service_ip if net.dns else net.pod_ip(0)
    pods = []
    for task, i, number, template in placed:
        pod = f"{name}-{task}-{i}"
        env = _own_env(template, pod, number, net)
        env.update({
            "MINDX_TASK_ID": _uid(name), "HostNetwork": "false", "HCCL_LOGIC_SUPERPOD_ID": "0",
            "ASCEND_VISIBLE_DEVICES": ",".join(str(d) for d in range(npus)),
            "LOCAL_WORLD_SIZE": str(npus), "WORLD_SIZE": str(npus * len(placed)),
            "LOCAL_RANK": ",".join(str(d) for d in range(npus)),
            "MASTER_ADDR": master, "MASTER_PORT": port, "RANK": str(number),
        })  # fmt: skip
        pods.append(Pod(pod, task, i, number, env))
    return pods


def _mindspore_pods(name: str, placed: Sequence[Placed], npus: int, net: Network) -> List[Pod]:
    """``setMindSporeEnv`` (mind-cluster env.go): the scheduler pod first, then the workers."""
    workers = sum(1 for task, *_ in placed if task == "worker")
    service = net.service_ip if net.dns else net.pod_ip(0)
    pods = []
    for task, i, number, template in placed:
        pod = f"{name}-{task}-{i}"
        env = _own_env(template, pod, number, net)
        env.update({"MINDX_TASK_ID": _uid(name), "HostNetwork": "false"})
        if task == "worker":  # only pods that request NPUs get these two
            env["ASCEND_VISIBLE_DEVICES"] = ",".join(str(d) for d in range(npus))
            env["HCCL_LOGIC_SUPERPOD_ID"] = "0"
        env.update({
            "MS_SCHED_HOST": net.pod_ip(number) if task == "scheduler" else service,
            "MS_LOCAL_WORKER": str(npus), "MS_WORKER_NUM": str(npus * workers),
            "MS_NODE_RANK": str(i), "MS_SCHED_PORT": str(_port(placed[0][3], 2222)),
            "MS_SERVER_NUM": "0", "MS_ROLE": "MS_SCHED" if task == "scheduler" else "MS_WORKER",
            "NPU_POD": "true" if task == "worker" else "false",
        })  # fmt: skip
        pods.append(Pod(pod, task, i, number, env))
    return pods


def rank_table(name: str, placed: Sequence[Placed], npus: int, net: Network) -> str:
    """The completed v1.0 table the ascend-operator writes for the job's pods."""
    servers = [
        {
            "server_id": _uid(name, f"{name}-{task}-{i}"),
            "host_ip": net.node_ip(number),
            "container_ip": net.pod_ip(number),
            "device": [
                {
                    "device_id": str(d),
                    "device_ip": f"172.16.{number // 250}.{(number % 250) * 8 % 250 + d + 1}",
                    "rank_id": str(number * npus + d),
                }
                for d in range(npus)
            ],
        }
        for task, i, number, _ in placed
    ]
    table = {"status": "completed", "version": "1.0", "server_count": str(len(servers))}
    return json.dumps({**table, "server_list": servers}, indent=2)


def _rank_table_pods(
    name: str, placed: Sequence[Placed], npus: int, maps: Dict[str, ConfigMap], net: Network
) -> List[Pod]:
    table = rank_table(name, placed, npus, net)
    pods = []
    for task, i, number, template in placed:
        files = {}
        mounts = {m.name: m.mount_path for m in template.spec.containers[0].volume_mounts or ()}
        for volume in template.spec.volumes or ():
            if volume.config_map and volume.config_map.name in maps and volume.name in mounts:
                files[f"{mounts[volume.name]}/hccl.json"] = table
        pod = f"{name}-{task}-{i}"
        pods.append(Pod(pod, task, i, number, _own_env(template, pod, number, net), files))
    return pods


def inject(manifests: Sequence[K8sModel], network: Optional[Network] = None) -> List[Pod]:
    """Every pod of the rendered job, in the manifest's order, with what it is given."""
    net = network or Network()
    maps = {m.metadata.name or "": m for m in manifests if isinstance(m, ConfigMap)}
    pods: List[Pod] = []
    for manifest in manifests:
        if isinstance(manifest, VolcanoJob):
            pods += _volcano(manifest, net)
        elif isinstance(manifest, PyTorchJob):
            pods += _pytorchjob(manifest, net)
        elif isinstance(manifest, TFJob):
            pods += _tfjob(manifest, net)
        elif isinstance(manifest, AscendJob):
            pods += _ascendjob(manifest, maps, net)
    return pods


def localize(pod: Pod, root: Path) -> Dict[str, str]:
    """Write the pod's mounted files under ``root/<pod>/`` and return its environment with
    their container paths replaced by those local files."""
    env = dict(pod.env)
    for path, text in pod.files.items():
        local = root / pod.name / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text, encoding="utf-8")
        env = {k: str(local) if v == path else v for k, v in env.items()}
    return env
