"""The operators' published CRD schemas (``tests/fixtures/crds/``) as strict JSON Schemas.

A CRD's ``openAPIV3Schema`` is JSON Schema with Kubernetes extensions. The API server prunes a
field no schema names; here every object that lists its ``properties`` gets
``additionalProperties: false`` instead, so a field the operator would silently drop fails
the test (``x-kubernetes-preserve-unknown-fields`` keeps an object open, as on the server).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Dict, List, Tuple

import jsonschema  # type: ignore[import-untyped]  # no stubs installed (types-jsonschema)
import yaml

CRDS = Path(__file__).parents[2] / "fixtures" / "crds"
FILES = {
    ("batch.volcano.sh/v1alpha1", "Job"): "volcano_batch.volcano.sh_jobs.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): "v1.9.0_kubeflow.org_pytorchjobs.yaml",
    ("kubeflow.org/v1", "TFJob"): "v1.9.0_kubeflow.org_tfjobs.yaml",
    ("mindxdl.gitee.com/v1", "AscendJob"): "ascend-operator.yaml",
}
PRESERVE = "x-kubernetes-preserve-unknown-fields"
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def strict(schema: Any) -> Any:
    """The schema with unknown fields refused wherever an object lists its properties."""
    if not isinstance(schema, dict):
        return schema  # additionalProperties: true / false
    result = {key: value for key, value in schema.items() if not key.startswith("x-kubernetes-")}
    if "properties" in schema:
        result["properties"] = {name: strict(sub) for name, sub in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get(PRESERVE):
            result["additionalProperties"] = False
    for key in ("items", "additionalProperties", "not"):
        if key in schema:
            result[key] = strict(schema[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in schema:
            result[key] = [strict(sub) for sub in schema[key]]
    return result


@functools.cache
def validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    """A validator of ``kind`` against its upstream CRD (the version ``api_version`` names)."""
    group, _, version = api_version.rpartition("/")
    path = CRDS / FILES[(api_version, kind)]
    for document in yaml.load_all(path.read_text(encoding="utf-8"), Loader=Loader):
        if not document or document.get("kind") != "CustomResourceDefinition":
            continue
        spec = document["spec"]
        if spec["group"] != group or spec["names"]["kind"] != kind:
            continue
        for served in spec["versions"]:
            if served["name"] == version:
                schema = strict(served["schema"]["openAPIV3Schema"])
                cls = jsonschema.validators.validator_for(
                    schema, default=jsonschema.Draft7Validator
                )
                cls.check_schema(schema)
                return cls(schema)
    msg = f"{path.name}: no CustomResourceDefinition of {kind} {api_version}"
    raise LookupError(msg)


def errors(manifest: Dict[str, Any]) -> List[Tuple[str, str]]:
    """(JSON path, message) of everything the upstream CRD refuses in ``manifest``."""
    check = validator(manifest["apiVersion"], manifest["kind"])
    return sorted((error.json_path, error.message) for error in check.iter_errors(manifest))
