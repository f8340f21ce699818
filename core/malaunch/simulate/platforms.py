"""What each platform injects into each container, fabricated for ``malaunch simulate``.

Pure functions: given the job's shape, a root directory for the containers' files and a source
of free ports, :func:`fabricate` returns every simulated node's environment (and the ModelArts
rank table to write). Facts follow ``platform-conventions.md`` §1.4, §4, §5, §6. Every node runs
on this machine, so node ``k`` gets its own loopback address ``127.0.0.<k+1>`` (all of
``127.0.0.0/8`` is loopback on Linux): addresses, ``server_id`` and ``MA_CURRENT_HOST_IP`` are
distinct per node, as on a real cluster.

The Kubernetes operators' platforms (``pytorchjob``, ``volcano-pytorch``, ``ascendjob``) come
from the manifest ``malaunch render`` writes for the job: :mod:`malaunch.simulate.operators`
injects into each of its pods what the operator would, with loopback addresses for names.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from malaunch.render.manifests import render
from malaunch.render.request import RenderRequest
from malaunch.simulate.operators import Network, inject

# Kubernetes operators' platforms -> the render target that describes them.
OPERATOR_TARGETS = {
    "pytorchjob": "pytorchjob",
    "volcano-pytorch": "volcano",
    "ascendjob": "ascendjob",
}
PLATFORMS = ("modelarts", "octopus", "volcano", "tf-ps", *OPERATOR_TARGETS)
# Without --platform: a host list, a node index and --nproc-per-node, which every framework
# that runs from plain hosts takes; parameter-server jobs need their roles.
DEFAULT_PLATFORM = "volcano"
PS_PLATFORM = "tf-ps"
RANK_TABLE_NAME = "jobstart_hccl.json"
INITIALIZING: Dict[str, Any] = {"status": "initializing"}


def _new_uuid() -> str:
    return uuid.uuid4().hex[:12]


@dataclasses.dataclass(frozen=True)
class JobShape:
    """The simulated job: platform, node and device counts, where the containers' files go.

    ``root`` holds the containers' own files (mounts, rank tables, data); ``log_dir`` the
    launchers' logs, one ``node-<k>`` folder per node.
    """

    platform: str
    nodes: int
    nproc_per_node: int
    root: Path
    log_dir: Path
    num_ps: int = 1
    first_device_id: int = 0
    job_uuid: str = dataclasses.field(default_factory=_new_uuid)
    chief: bool = False

    @property
    def node_count(self) -> int:
        """Simulated nodes: with tf-ps one per task (chief, ps, workers)."""
        if self.platform != PS_PLATFORM:
            return self.nodes
        return self.nodes + self.num_ps + (1 if self.chief else 0)


@dataclasses.dataclass(frozen=True)
class SimNode:
    """One simulated container: what the platform gives it, and where its launcher logs."""

    index: int
    label: str
    host: str
    env: Dict[str, str]
    log_dir: Path
    launcher_args: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class SimCluster:
    """Every node, the directories to create, and the rank table ModelArts would write."""

    nodes: Tuple[SimNode, ...]
    directories: Tuple[Path, ...]
    rank_table: Optional[Dict[str, Any]] = None
    rank_table_files: Tuple[Path, ...] = ()
    # Set when the platform names no rendezvous port: the launchers then get --master-port.
    master_port: Optional[int] = None
    # The job channel's port, given to every launcher as --job-port (a free one, so that
    # simulations running side by side never meet).
    job_port: Optional[int] = None


def default_platform(framework: str) -> Tuple[str, str]:
    """The platform ``simulate`` fabricates without ``--platform``, and why that one."""
    if framework == "tensorflow_ps":
        return PS_PLATFORM, "one node per ps and worker task, the roles tensorflow_ps needs"
    return DEFAULT_PLATFORM, "the plainest: a host list, a node index and --nproc-per-node"


def loopback(index: int) -> str:
    """Node ``index``'s own loopback address: 127.0.0.1, 127.0.0.2, ..."""
    number = index + 1
    return f"127.0.{number // 256}.{number % 256}"


def fabricate(shape: JobShape, ports: Iterator[int]) -> SimCluster:
    """The platform's view of every node of ``shape``."""
    if shape.platform in OPERATOR_TARGETS:
        cluster = _operator(shape, ports)
    elif shape.platform == "tf-ps":
        cluster = _tf_ps(shape, ports)
    else:
        cluster = _worker_pool(shape, ports)
    return dataclasses.replace(cluster, job_port=next(ports))


def node_dir(shape: JobShape, index: int) -> Path:
    """Node ``index``'s own files (its container's disk)."""
    return shape.root / f"node-{index}"


def node_log_dir(shape: JobShape, index: int) -> Path:
    return shape.log_dir / f"node-{index}"


def _worker_pool(shape: JobShape, ports: Iterator[int]) -> SimCluster:
    """ModelArts, Octopus and Volcano: one worker task of ``nodes`` pods."""
    hosts = [loopback(k) for k in range(shape.nodes)]
    port = next(ports)
    nodes: List[SimNode] = []
    directories: List[Path] = []
    for k, host in enumerate(hosts):
        env = _volcano_env(hosts, k)
        args: Tuple[str, ...] = ()
        if shape.platform == "volcano":
            env["VK_TASK_INDEX"] = str(k)  # Volcano's env plugin sets both names
            # Plain Volcano says nothing about devices: the start command does.
            args = ("--nproc-per-node", str(shape.nproc_per_node))
        else:
            env.update(_modelarts_env(shape, k, host))
            directories.append(Path(env["MA_MOUNT_PATH"]))
        if shape.platform == "octopus":
            env["VC_WORKER_PORT"] = str(port)
            data = _octopus_data(node_dir(shape, k))
            env.update(data)
            directories.extend(_data_dirs(data))
        if shape.platform == "modelarts":
            env["RANK_TABLE_FILE"] = str(node_dir(shape, k) / "config")  # a directory
        nodes.append(SimNode(k, f"worker {k}", host, env, node_log_dir(shape, k), args))
    master_port = None if shape.platform == "octopus" else port
    if shape.platform != "modelarts":
        return SimCluster(tuple(nodes), tuple(directories), master_port=master_port)
    files = tuple(node_dir(shape, k) / "config" / RANK_TABLE_NAME for k in range(shape.nodes))
    return SimCluster(
        tuple(nodes),
        tuple(directories) + tuple(f.parent for f in files),
        rank_table=template2_table(shape, hosts),
        rank_table_files=files,
        master_port=master_port,
    )


def _volcano_env(hosts: List[str], index: int) -> Dict[str, str]:
    return {
        "VC_WORKER_HOSTS": ",".join(hosts),
        "VC_WORKER_NUM": str(len(hosts)),
        "VC_TASK_INDEX": str(index),
    }


def pod_name(shape: JobShape, task: str, index: int) -> str:
    return f"modelarts-job-{shape.job_uuid}-{task}-{index}"


def _modelarts_env(shape: JobShape, index: int, host: str) -> Dict[str, str]:
    """The ModelArts training-container variables of §4.1 (new-version training)."""
    return {
        "MA_VJ_NAME": f"ma-job-{shape.job_uuid}",
        "MA_CURRENT_INSTANCE_NAME": pod_name(shape, "worker", index),
        "MA_CURRENT_HOST_IP": host,
        "MA_CURRENT_IP": host,
        "MA_MOUNT_PATH": str(node_dir(shape, index) / "mount"),
        "MA_LOG_DIR": str(node_log_dir(shape, index)),
        "MA_TASK_NAME": "worker",
        "MA_NUM_HOSTS": str(shape.nodes),
        "MA_NUM_GPUS": str(shape.nproc_per_node),
    }


def _octopus_data(base: Path) -> Dict[str, str]:
    """Octopus data variables (§5), each pointing at a directory of this node."""
    data = base / "data"
    return {
        "DATASET": str(data / "dataset"),
        "DATASET_MAP": json.dumps({"dataset-0": str(data / "dataset" / "dataset-0")}),
        "CACHED_DATASET": str(data / "cached-dataset"),
        "RESULT": str(base / "result"),
        "MODEL": str(data / "model"),
    }


def _data_dirs(data: Dict[str, str]) -> List[Path]:
    paths = [Path(data[name]) for name in ("DATASET", "CACHED_DATASET", "RESULT", "MODEL")]
    return paths + [Path(p) for p in json.loads(data["DATASET_MAP"]).values()]


def template2_table(shape: JobShape, hosts: List[str]) -> Dict[str, Any]:
    """The completed ModelArts ``jobstart_hccl.json`` (template 2, §1.4).

    Instances are listed last pod first, as real files list them in cache order: the
    launcher must order pods by the number after the last ``-`` of ``pod_name``.
    """
    first = shape.first_device_id
    instances = [
        {
            "pod_name": pod_name(shape, "worker", k),
            "server_id": host,
            "devices": [
                {"device_id": str(first + d), "device_ip": f"10.{k // 256}.{k % 256}.{d + 1}"}
                for d in range(shape.nproc_per_node)
            ],
        }
        for k, host in enumerate(hosts)
    ]
    return {
        "status": "completed",
        "group_count": "1",
        "group_list": [
            {
                "group_name": "worker",
                "device_count": str(shape.nodes * shape.nproc_per_node),
                "instance_count": str(shape.nodes),
                "instance_list": instances[::-1],
            }
        ],
    }


def partial_table(table: Dict[str, Any]) -> Dict[str, Any]:
    """A half-assembled table: still initializing, one instance so far (§1.6, §10.3)."""
    group = dict(table["group_list"][0])
    group["instance_list"] = group["instance_list"][:1]
    return {**table, "status": "initializing", "group_list": [group]}


def _tf_ps(shape: JobShape, ports: Iterator[int]) -> SimCluster:
    """ModelArts TF PS: one container per task, the chief (``--chief``) and ps first;
    ``nodes`` is the worker count."""
    tasks = [("chief", 0)] if shape.chief else []
    tasks += [("ps", i) for i in range(shape.num_ps)] + [("worker", i) for i in range(shape.nodes)]
    addresses = [f"{loopback(k)}:{next(ports)}" for k in range(len(tasks))]
    hosts: Dict[str, List[str]] = {}
    for (role, _), address in zip(tasks, addresses):
        hosts.setdefault(role, []).append(address)
    variables = {f"TF_{role.upper()}_HOSTS": ",".join(listed) for role, listed in hosts.items()}
    nodes = []
    for k, (role, index) in enumerate(tasks):
        host = loopback(k)
        env = _modelarts_env(shape, k, host)
        del env["MA_NUM_GPUS"], env["MA_NUM_HOSTS"]  # counts of one task: not given to PS jobs
        env.update(
            {
                "MA_CURRENT_INSTANCE_NAME": pod_name(shape, role, index),
                "MA_TASK_NAME": role,
                "VC_TASK_INDEX": str(index),  # the index within the task: ps-0 and worker-0
                **variables,
            }
        )
        log_dir = node_log_dir(shape, k)
        nodes.append(SimNode(k, f"{role} {index}", host, env, log_dir))
    directories = tuple(Path(node.env["MA_MOUNT_PATH"]) for node in nodes)
    return SimCluster(tuple(nodes), directories)


def _operator(shape: JobShape, ports: Iterator[int]) -> SimCluster:
    """A PyTorch job as the operator starts it: the rendered manifest's pods, on loopback."""
    request = RenderRequest(
        target=OPERATOR_TARGETS[shape.platform],
        framework="torch_ddp",  # the platform's PyTorch layout, whatever the launchers run
        nodes=shape.nodes,
        image="simulate",
        command=("simulate",),
        nproc_per_node=shape.nproc_per_node,
        name=f"job-{shape.job_uuid}",
        master_port=next(ports),
    )
    net = Network(dns=False, pod_ip=loopback, node_ip=loopback, service_ip=loopback(0))
    # Plain Volcano says nothing about devices: the start command does (as in render's).
    args = ("--nproc-per-node", str(shape.nproc_per_node)) if request.target == "volcano" else ()
    nodes = tuple(
        SimNode(pod.number, f"{pod.task} {pod.index}", loopback(pod.number), pod.env,
                node_log_dir(shape, pod.number), args)
        for pod in inject(render(request), net)
    )  # fmt: skip
    return SimCluster(nodes, ())
