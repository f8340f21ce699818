"""Render a request as its target's manifests, and as YAML."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple, Type

from malaunch.errors import TopologyError
from malaunch.render import ascend, emit, kubeflow, volcano
from malaunch.render.crds import AscendJob, PyTorchJob, TFJob, VolcanoJob
from malaunch.render.k8s import ConfigMap, K8sModel
from malaunch.render.request import RenderRequest, check

BUILDERS: Dict[str, Callable[[RenderRequest], List[K8sModel]]] = {
    "volcano": volcano.render,
    "pytorchjob": kubeflow.render_pytorchjob,
    "ascendjob": ascend.render,
    "tfjob": kubeflow.render_tfjob,
}


def render(request: RenderRequest) -> List[K8sModel]:
    """The manifests of ``request.target``, in the order to apply them."""
    return BUILDERS[check(request).target](request)


def to_yaml(manifests: List[K8sModel]) -> str:
    """The manifests as one YAML stream (``kubectl apply -f -`` reads it)."""
    return emit.dump_all([manifest.to_dict() for manifest in manifests])


KINDS: Dict[Tuple[str, str], Type[K8sModel]] = {
    ("batch.volcano.sh/v1alpha1", "Job"): VolcanoJob,
    ("kubeflow.org/v1", "PyTorchJob"): PyTorchJob,
    ("kubeflow.org/v1", "TFJob"): TFJob,
    ("mindxdl.gitee.com/v1", "AscendJob"): AscendJob,
    ("v1", "ConfigMap"): ConfigMap,
}


def load(documents: Sequence[Mapping[str, Any]]) -> List[K8sModel]:
    """Rendered manifests read back (from YAML or JSON) into their models."""
    models = []
    for number, document in enumerate(documents, start=1):
        key = (str(document.get("apiVersion")), str(document.get("kind")))
        if key not in KINDS:
            msg = f"manifest {number}: {key[0]} {key[1]} is not a kind malaunch renders"
            raise TopologyError(msg)
        models.append(KINDS[key].model_validate(document))
    return models
