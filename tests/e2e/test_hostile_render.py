"""``malaunch render``'s Kubernetes names (issue 13): a value Kubernetes would refuse, or no
name at all, is exit 64 in one line naming the option, before any YAML is printed.

A namespace is a DNS label, a Volcano queue (a cluster-scoped object) a DNS subdomain, an
extended resource a qualified name; the values real clusters use pass and reach the manifest.
"""

from __future__ import annotations

from typing import List

import pytest
import yaml

from malaunch.testing import run_cli

JOB = ["--nodes", "2", "--image", "registry.example/train:1", "--framework", "torch_ddp"]
COMMAND = ["--", "python", "train.py"]
NAMESPACE = (
    "expected a Kubernetes namespace: a DNS label of at most 63 characters (lower-case "
    "letters, digits and '-')"
)
QUEUE = (
    "expected a Volcano queue name: at most 253 characters (lower-case letters, digits, '-' "
    "and '.')"
)
RESOURCE = (
    "expected an extended resource name such as nvidia.com/gpu: an optional DNS prefix and "
    "'/', then at most 63 letters, digits, '-', '_' and '.'"
)


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--namespace", "A_B", NAMESPACE),
        ("--namespace", "team-a.dev", NAMESPACE),  # a label: no dots
        ("--namespace", "-team", NAMESPACE),
        ("--namespace", "a" * 64, NAMESPACE),
        ("--namespace", "team\nb", NAMESPACE),
        ("--queue", "a b", QUEUE),
        ("--queue", "Default", QUEUE),
        ("--queue", "q.", QUEUE),
        ("--queue", "q" * 254, QUEUE),
        ("--accelerator", "$(id)", RESOURCE),
        ("--accelerator", "nvidia.com/gpu count", RESOURCE),
        ("--accelerator", "/gpu", RESOURCE),
        ("--accelerator", "nvidia.com/a/gpu", RESOURCE),
        ("--accelerator", "Nvidia.com/gpu", RESOURCE),  # the prefix is a lower-case DNS name
        ("--accelerator", "nvidia.com/" + "g" * 64, RESOURCE),
        ("--accelerator", "nvidia.com/gpu-", RESOURCE),
    ],
)
@pytest.mark.parametrize("target", ["volcano", "pytorchjob"])
def test_a_bad_name_is_64_naming_the_option(
    target: str, option: str, value: str, expected: str
) -> None:
    result = run_cli(["render", target, *JOB, option, value, *COMMAND])
    assert (result.code, result.stdout) == (64, ""), result.stderr
    assert result.stderr == f"malaunch: error: {option} {value!r}: {expected}\n"


@pytest.mark.parametrize(
    ("options", "namespace", "queue", "resource"),
    [
        (["--namespace", "team-a", "--queue", "default"], "team-a", "default", None),
        (["--queue", "gpu.high-priority"], None, "gpu.high-priority", None),
        (["--accelerator", "nvidia.com/gpu"], None, None, "nvidia.com/gpu"),
        (["--accelerator", "huawei.com/Ascend910"], None, None, "huawei.com/Ascend910"),
        (["--accelerator", "example.com/fpga_v2.1"], None, None, "example.com/fpga_v2.1"),
        (["--namespace", "a" * 63], "a" * 63, None, None),
    ],
)
def test_names_kubernetes_takes_reach_the_manifest(
    options: List[str], namespace: str, queue: str, resource: str
) -> None:
    result = run_cli(["render", "volcano", *JOB, *options, *COMMAND])
    assert (result.code, result.stderr) == (0, ""), result.stderr
    (job,) = yaml.safe_load_all(result.stdout)
    assert job["metadata"].get("namespace") == namespace
    assert job["spec"].get("queue") == queue
    container = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    requests = container.get("resources", {}).get("requests", {})
    assert (resource in requests) if resource else requests == {}
