"""What ``malaunch render`` is asked for, and the pod template every target shares.

Every pod runs one container whose command is ``malaunch <launcher options> -- <command>``:
no shell, the user's command untouched. Every pod also gets a memory-backed ``/dev/shm``
(PyTorch's data loaders and NCCL need more than the container runtime's 64 MB) and a
termination grace period that covers malaunch's own ``--grace-period`` plus a margin for its
summary and final stage-out, so Kubernetes' SIGKILL never cuts the teardown short.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Dict, Optional, Sequence, Tuple

from malaunch.errors import UsageError
from malaunch.render.k8s import (
    Container,
    ContainerPort,
    EmptyDirVolumeSource,
    EnvVar,
    ObjectMeta,
    PodSpec,
    PodTemplateSpec,
    ResourceRequirements,
    Volume,
    VolumeMount,
)

TARGETS = ("volcano", "pytorchjob", "ascendjob", "tfjob")
GRACE_MARGIN = 15  # seconds for the summary, the job channel's goodbye and a final stage-out
MIN_GRACE = 30  # Kubernetes' own default: never ask for less
SHM = (
    Volume(name="dshm", empty_dir=EmptyDirVolumeSource(medium="Memory")),
    VolumeMount(name="dshm", mount_path="/dev/shm"),
)
# Job names must be DNS-1035 labels (a letter first: the training operator's admission webhook
# and Kubernetes Service names), and pod names <job>-<task>-<index> DNS labels of at most 63.
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,43}[a-z0-9])?", re.ASCII)
MAX_NAME = 45
# Kubernetes' own rules (apimachinery's validation), so that a value kubectl would refuse, or
# one that is not a name at all ('$(id)', 'a b'), is refused here with the option named.
# A namespace is a DNS label; a Volcano queue is a cluster-scoped object, whose name is a DNS
# subdomain; an extended resource is a qualified name: an optional DNS-subdomain prefix and '/'.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*", re.ASCII)
_NAMESPACE = re.compile(_LABEL, re.ASCII)
_QUALIFIED = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
MAX_LABEL = 63
MAX_SUBDOMAIN = 253
# How Python holds an argument's bytes that are not UTF-8 (surrogateescape).
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclasses.dataclass(frozen=True)
class RenderRequest:
    """One ``malaunch render`` call: the target, the job's shape and the container's start.

    ``launcher_args`` are the malaunch options written into the container (``--framework`` and
    ``--nproc-per-node`` included); ``master_port`` replaces each platform's default
    rendezvous port (Volcano's pytorch plugin 23456, Kubeflow 23456, MindX 2222);
    ``job_port`` and ``job_channel`` are the launcher's ``--job-port`` and
    ``--job-channel/--no-job-channel``, for targets whose Services must list the job port;
    ``chief``: a TensorFlow job's chief task (``--chief``), ``success_policy`` the launcher's
    ``--success-policy``; ``accelerator_type``: the AscendJob's ``ring-controller.atlas``
    label; ``node_selector``: every pod's ``nodeSelector`` (``--node-selector``).
    """

    target: str
    framework: str
    nodes: int
    image: str
    command: Tuple[str, ...]
    launcher_args: Tuple[str, ...] = ()
    nproc_per_node: Optional[int] = None
    num_ps: int = 1
    name: Optional[str] = None
    namespace: Optional[str] = None
    queue: Optional[str] = None
    accelerator: Optional[str] = None
    grace_period: float = 5.0
    platform_restarts: int = 2
    master_port: Optional[int] = None
    job_port: Optional[int] = None
    job_channel: bool = True
    chief: bool = False
    success_policy: Optional[str] = None
    accelerator_type: str = "ascend-910b"
    node_selector: Tuple[Tuple[str, str], ...] = ()

    @property
    def job_name(self) -> str:
        return self.name or "malaunch-" + self.framework.lower().replace("_", "-")

    @property
    def nproc(self) -> int:
        return self.nproc_per_node or 1


def check(request: RenderRequest) -> RenderRequest:
    """Refuse what no target could render, naming the option."""
    if request.target not in TARGETS:
        msg = f"render: unknown target {request.target!r}: expected one of {', '.join(TARGETS)}"
        raise UsageError(msg)
    name = request.job_name
    if len(name) > MAX_NAME or not _NAME.fullmatch(name):
        msg = (
            f"--name {name!r}: expected a DNS-1035 label of at most {MAX_NAME} characters (a "
            "lower-case letter, then lower-case letters, digits and '-', not ending in '-'), "
            "as the operators require, and so that <name>-<task>-<index> pod names stay valid"
        )
        raise UsageError(msg)
    _check_kubernetes_names(request)
    _check_node_selector(request)
    if not request.image.strip() or any(c.isspace() for c in request.image):
        msg = f"--image {request.image!r}: expected an image reference without spaces"
        raise UsageError(msg)
    if not request.command:
        msg = "render: no command given: malaunch render TARGET ... --framework NAME -- COMMAND"
        raise UsageError(msg)
    _check_chief(request)
    _check_text(request)
    return request


def _check_node_selector(request: RenderRequest) -> None:
    for key, value in request.node_selector:
        if not _is_qualified(key) or not _is_label_value(value):
            pair = f"{key}={value}"
            msg = (
                f"--node-selector {pair!r}: expected a Kubernetes label KEY=VALUE (KEY an "
                "optional DNS prefix and '/', then a name; VALUE at most 63 letters, digits, "
                "'-', '_' and '.')"
            )
            raise UsageError(msg)


def _check_chief(request: RenderRequest) -> None:
    """A chief task only in TensorFlow parameter-server jobs, and the chief success policy
    only with one (each pod's launcher would refuse it)."""
    if request.chief and layout(request.framework) != "ps":
        msg = (
            f"--chief: only TensorFlow parameter-server jobs (--framework tensorflow_ps) have a "
            f"chief task, not {request.framework}"
        )
        raise UsageError(msg)
    if request.success_policy == "chief" and not request.chief:
        msg = "--success-policy chief: the rendered job has no chief task; add --chief"
        raise UsageError(msg)


def _check_text(request: RenderRequest) -> None:
    """Manifests are UTF-8: an argument holding bytes that are not (Python keeps them as lone
    surrogates) has no YAML, JSON or Kubernetes form, so it is refused naming the option.
    Every other character is written, control characters as YAML escapes."""
    option = "a launcher option"
    for token in request.launcher_args:
        if token.startswith("--"):
            option = token.partition("=")[0]
        _check_unicode(option, token)
    _check_unicode("--image", request.image)
    for number, argument in enumerate(request.command, start=1):
        _check_unicode(f"COMMAND (argument {number})", argument)


def _check_unicode(where: str, text: str) -> None:
    if _SURROGATE.search(text):
        msg = (
            f"{where} {text!r}: not UTF-8 text (bytes that decode to no character), which a "
            "Kubernetes manifest cannot hold"
        )
        raise UsageError(msg)


def _check_kubernetes_names(request: RenderRequest) -> None:
    namespace, queue, accelerator = request.namespace, request.queue, request.accelerator
    if namespace is not None and not _is_label(namespace):
        msg = (
            f"--namespace {namespace!r}: expected a Kubernetes namespace: a DNS label of at "
            f"most {MAX_LABEL} characters (lower-case letters, digits and '-')"
        )
        raise UsageError(msg)
    if queue is not None and not _is_subdomain(queue):
        msg = (
            f"--queue {queue!r}: expected a Volcano queue name: at most {MAX_SUBDOMAIN} "
            "characters (lower-case letters, digits, '-' and '.')"
        )
        raise UsageError(msg)
    if accelerator is not None and not _is_qualified(accelerator):
        msg = (
            f"--accelerator {accelerator!r}: expected an extended resource name such as "
            f"nvidia.com/gpu: an optional DNS prefix and '/', then at most {MAX_LABEL} "
            "letters, digits, '-', '_' and '.'"
        )
        raise UsageError(msg)


def _is_label(text: str) -> bool:
    return len(text) <= MAX_LABEL and _NAMESPACE.fullmatch(text) is not None


def _is_subdomain(text: str) -> bool:
    return len(text) <= MAX_SUBDOMAIN and _SUBDOMAIN.fullmatch(text) is not None


def _is_label_value(text: str) -> bool:
    return not text or (len(text) <= MAX_LABEL and _QUALIFIED.fullmatch(text) is not None)


def _is_qualified(text: str) -> bool:
    prefix, slash, name = text.rpartition("/")
    if slash and not _is_subdomain(prefix):
        return False
    return len(name) <= MAX_LABEL and _QUALIFIED.fullmatch(name) is not None


def metadata(request: RenderRequest, labels: Optional[Dict[str, str]] = None) -> ObjectMeta:
    return ObjectMeta(name=request.job_name, namespace=request.namespace, labels=labels)


def grace_seconds(grace_period: float) -> int:
    """``terminationGracePeriodSeconds``: malaunch's grace period plus the margin."""
    return max(MIN_GRACE, math.ceil(grace_period) + GRACE_MARGIN)


def start_command(request: RenderRequest) -> Tuple[str, ...]:
    return ("malaunch", *request.launcher_args, "--", *request.command)


@dataclasses.dataclass(frozen=True)
class PodParts:
    """What one target adds to the shared pod template."""

    container: str
    accelerators: int = 0
    port: Optional[ContainerPort] = None
    more_ports: Tuple[ContainerPort, ...] = ()
    restart_policy: Optional[str] = None
    env: Tuple[EnvVar, ...] = ()
    volumes: Tuple[Volume, ...] = ()
    mounts: Tuple[VolumeMount, ...] = ()
    labels: Optional[Dict[str, str]] = None


def _resources(accelerator: Optional[str], count: int) -> Optional[ResourceRequirements]:
    if accelerator is None or count == 0:
        return None
    amount = {accelerator: str(count)}
    return ResourceRequirements(requests=amount, limits=amount)


def pod_template(request: RenderRequest, parts: PodParts) -> PodTemplateSpec:
    """The one-container pod that starts malaunch, with ``/dev/shm`` and the grace period."""
    volume, mount = SHM
    container = Container(
        name=parts.container,
        image=request.image,
        command=start_command(request),
        env=parts.env or None,
        ports=(parts.port, *parts.more_ports) if parts.port else None,
        resources=_resources(request.accelerator, parts.accelerators),
        volume_mounts=(mount, *parts.mounts),
    )
    return PodTemplateSpec(
        metadata=ObjectMeta(labels=parts.labels) if parts.labels else None,
        spec=PodSpec(
            containers=(container,),
            restart_policy=parts.restart_policy,
            termination_grace_period_seconds=grace_seconds(request.grace_period),
            node_selector=dict(request.node_selector) or None,
            volumes=(volume, *parts.volumes),
        ),
    )


def layout(framework: str) -> str:
    """How a framework's job is shaped: ``torch`` (a master task and workers), ``ps``
    (parameter servers and workers) or ``workers`` (one task of equal pods)."""
    return {"torch_ddp": "torch", "tensorflow_ps": "ps"}.get(framework, "workers")


def split(nodes: int) -> Sequence[Tuple[str, int]]:
    """A torch job's pods: one master, the rest workers (no worker task for one node)."""
    return [("master", 1)] + ([("worker", nodes - 1)] if nodes > 1 else [])
