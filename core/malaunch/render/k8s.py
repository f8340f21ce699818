"""The subset of Kubernetes core objects (``v1``) a rendered job uses, as frozen models.

Field names are Python's; :meth:`K8sModel.to_dict` gives Kubernetes' camelCase, leaving out
what is unset, so the dict is the manifest as ``kubectl`` expects it.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class K8sModel(BaseModel):
    """Frozen, no unknown fields, camelCase on output."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    def to_dict(self) -> Dict[str, Any]:
        """The manifest form: camelCase keys, unset fields left out, plain JSON types."""
        dumped: Dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped


class ObjectMeta(K8sModel):
    name: Optional[str] = None
    namespace: Optional[str] = None
    labels: Optional[Dict[str, str]] = None
    annotations: Optional[Dict[str, str]] = None


class ObjectFieldSelector(K8sModel):
    field_path: str


class EnvVarSource(K8sModel):
    field_ref: ObjectFieldSelector


class EnvVar(K8sModel):
    name: str
    value: Optional[str] = None
    value_from: Optional[EnvVarSource] = None


def env_from_field(name: str, field_path: str) -> EnvVar:
    """A variable the kubelet fills from the pod (downward API), e.g. ``status.hostIP``."""
    return EnvVar(
        name=name, value_from=EnvVarSource(field_ref=ObjectFieldSelector(field_path=field_path))
    )


class ContainerPort(K8sModel):
    name: str
    container_port: int


class ResourceRequirements(K8sModel):
    requests: Optional[Dict[str, str]] = None
    limits: Optional[Dict[str, str]] = None


class VolumeMount(K8sModel):
    name: str
    mount_path: str


class EmptyDirVolumeSource(K8sModel):
    medium: Optional[str] = None


class ConfigMapVolumeSource(K8sModel):
    name: str


class Volume(K8sModel):
    name: str
    empty_dir: Optional[EmptyDirVolumeSource] = None
    config_map: Optional[ConfigMapVolumeSource] = None


class Container(K8sModel):
    name: str
    image: str
    command: Tuple[str, ...]
    env: Optional[Tuple[EnvVar, ...]] = None
    ports: Optional[Tuple[ContainerPort, ...]] = None
    resources: Optional[ResourceRequirements] = None
    volume_mounts: Optional[Tuple[VolumeMount, ...]] = None


class PodSpec(K8sModel):
    containers: Tuple[Container, ...]
    restart_policy: Optional[str] = None
    termination_grace_period_seconds: Optional[int] = None
    node_selector: Optional[Dict[str, str]] = None
    volumes: Optional[Tuple[Volume, ...]] = None


class PodTemplateSpec(K8sModel):
    metadata: Optional[ObjectMeta] = None
    spec: PodSpec


class ConfigMap(K8sModel):
    api_version: str = "v1"
    kind: str = "ConfigMap"
    metadata: ObjectMeta
    data: Dict[str, str]
