"""``malaunch render`` through the installed command: YAML out, launcher options into the
containers, one-line usage errors (exit 64)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest
import yaml

from malaunch.render.manifests import render, to_yaml
from malaunch.render.request import RenderRequest
from malaunch.testing import clean_env, run_cli

COMMAND = ["--", "python", "train.py", "--data", "/data/x y", "--lr=1e-3"]


def rendered(*args: str, env: Optional[Dict[str, str]] = None) -> List[Dict[str, Any]]:
    result = run_cli(["render", *args], env=env)
    assert result.code == 0, result.stderr
    assert result.stderr == ""
    return list(yaml.safe_load_all(result.stdout))


def command_of(doc: Dict[str, Any]) -> List[str]:
    spec = doc["spec"]
    template = (
        spec["tasks"][0]["template"]
        if "tasks" in spec
        else next(iter(spec["pytorchReplicaSpecs"].values()))["template"]
    )
    command: List[str] = template["spec"]["containers"][0]["command"]
    return command


def test_the_command_prints_what_the_renderer_builds() -> None:
    args = ["volcano", "--nodes", "2", "--nproc-per-node", "4", "--framework", "torch_ddp",
            "--image", "img:1", "--accelerator", "nvidia.com/gpu", *COMMAND]  # fmt: skip
    result = run_cli(["render", *args])
    assert result.code == 0, result.stderr
    expected = RenderRequest(
        target="volcano", framework="torch_ddp", nodes=2, image="img:1",
        command=tuple(COMMAND[1:]), nproc_per_node=4, accelerator="nvidia.com/gpu",
        launcher_args=("--framework", "torch_ddp", "--nproc-per-node", "4"),
    )  # fmt: skip
    assert result.stdout == to_yaml(render(expected))


def test_launcher_options_reach_the_containers_and_the_command_stays_untouched() -> None:
    (doc,) = rendered(
        "pytorchjob", "--nodes", "2", "--image", "img:1", "--framework", "torch_ddp",
        "--console-ranks", "0", "--env", "NCCL_DEBUG=INFO", "--grace-period", "20",
        "--max-restarts", "1", *COMMAND,
    )  # fmt: skip
    assert command_of(doc) == [
        "malaunch", "--framework", "torch_ddp", "--console-ranks", "0", "--grace-period",
        "20.0", "--env", "NCCL_DEBUG=INFO", "--max-restarts", "1", *COMMAND,
    ]  # fmt: skip
    template = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    assert template["spec"]["terminationGracePeriodSeconds"] == 35


def test_framework_and_nproc_from_malaunch_variables_are_written_too() -> None:
    env = clean_env({"MALAUNCH_FRAMEWORK": "mindspore", "MALAUNCH_NPROC_PER_NODE": "8"})
    (doc,) = rendered("volcano", "--nodes", "2", "--image", "img:1", *COMMAND, env=env)
    assert command_of(doc)[:5] == ["malaunch", "--framework", "mindspore", "--nproc-per-node", "8"]


@pytest.mark.parametrize(
    ("options", "ports"),
    [
        ([], [("ascendjob-port", 2222), ("malaunch-job", 2223)]),
        (["--rendezvous-port", "29500"], [("ascendjob-port", 29500), ("malaunch-job", 29501)]),
        (["--job-port", "31000"], [("ascendjob-port", 2222), ("malaunch-job", 31000)]),
        (["--no-job-channel"], [("ascendjob-port", 2222)]),
        (["--nodes", "1"], [("ascendjob-port", 2222)]),
    ],
)
def test_an_ascendjob_declares_the_job_port_its_master_service_must_forward(
    options: List[str], ports: List[Any]
) -> None:
    """The MindX master Service (MASTER_ADDR) forwards only the ports its pod declares: the
    other pods reach node 0's job channel through it."""
    (doc,) = rendered(
        "ascendjob", "--nodes", "2", "--image", "img:1", "--framework", "torch_ddp",
        *options, *COMMAND,
    )  # fmt: skip
    for spec in doc["spec"]["replicaSpecs"].values():
        container = spec["template"]["spec"]["containers"][0]
        assert [(p["name"], p["containerPort"]) for p in container["ports"]] == ports


def test_ps_count_is_the_renders_own_option() -> None:
    (doc,) = rendered(
        "tfjob", "--nodes", "3", "--num-ps", "2", "--image", "img:1",
        "--framework", "tensorflow_ps", *COMMAND,
    )  # fmt: skip
    replicas = {k: v["replicas"] for k, v in doc["spec"]["tfReplicaSpecs"].items()}
    assert replicas == {"PS": 2, "Worker": 3}
    assert (
        "--num-ps"
        not in doc["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["command"]
    )


def test_a_chief_and_the_ascend_model_reach_the_manifests() -> None:
    tf = rendered("tfjob", "--nodes", "2", "--image", "i", "--framework", "tensorflow_ps",
                  "--chief", *COMMAND)  # fmt: skip
    assert list(tf[0]["spec"]["tfReplicaSpecs"]) == ["Chief", "PS", "Worker"]
    ascend = rendered("ascendjob", "--nodes", "2", "--image", "i", "--framework", "mindspore",
                      "--accelerator-type", "ascend-910", "--node-selector", "host-arch=huawei-arm",
                      *COMMAND)  # fmt: skip
    assert ascend[0]["metadata"]["labels"]["ring-controller.atlas"] == "ascend-910"
    for replica in ascend[0]["spec"]["replicaSpecs"].values():
        template = replica["template"]
        assert template["metadata"]["labels"] == {"ring-controller.atlas": "ascend-910"}
        assert template["spec"]["nodeSelector"] == {"host-arch": "huawei-arm"}
        # render's own options stay out of the pods' command
        assert "--accelerator-type" not in template["spec"]["containers"][0]["command"]


def test_help_names_the_targets() -> None:
    result = run_cli(["render", "--help"])
    assert result.code == 0
    assert "Usage: malaunch render [OPTIONS] TARGET [COMMAND]..." in result.stdout
    for word in ("volcano", "pytorchjob", "ascendjob", "tfjob", "--platform-restarts"):
        assert word in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["volcano", "--nodes", "2", "--framework", "torch_ddp", *COMMAND],
            "render: missing --image: the container image that has malaunch installed",
        ),
        (
            ["volcano", "--image", "i", "--framework", "torch_ddp", *COMMAND],
            "render: missing --nodes: how many pods run training processes",
        ),
        (
            ["volcano", "--nodes", "2", "--image", "i", *COMMAND],
            "render: missing --framework (or MALAUNCH_FRAMEWORK): the framework plugin to "
            "launch with",
        ),
        (
            ["tfjob", "--nodes", "2", "--image", "i", "--framework", "torch_ddp", *COMMAND],
            "render tfjob: framework 'torch_ddp' does not run TensorFlow parameter servers: use "
            "--framework tensorflow_ps, or render volcano / pytorchjob",
        ),
        (
            ["ascendjob", "--nodes", "2", "--image", "i", "--framework", "torch_ddp"],
            "render: no command given: malaunch render TARGET ... --framework NAME -- COMMAND",
        ),
        (
            ["volcano", "--nodes", "0", "--image", "i", "--framework", "torch_ddp", *COMMAND],
            "--nodes: '0': expected an integer from 1 to 100000",
        ),
        (
            [
                "pytorchjob",
                "--nodes",
                "2",
                "--image",
                "i",
                "--framework",
                "torch_ddp",
                "--name",
                "1bert",
                *COMMAND,
            ],
            "--name '1bert': expected a DNS-1035 label of at most 45 characters (a lower-case "
            "letter, then lower-case letters, digits and '-', not ending in '-'), as the "
            "operators require, and so that <name>-<task>-<index> pod names stay valid",
        ),
        (
            [
                "volcano",
                "--nodes",
                "2",
                "--image",
                "i",
                "--framework",
                "torch_ddp",
                "--dry-run",
                *COMMAND,
            ],
            "render: not for a rendered job: --dry-run (every pod would print its plan and exit 0)",
        ),
        (
            [
                "volcano",
                "--nodes",
                "2",
                "--image",
                "i",
                "--framework",
                "torch_ddp",
                "--print-env",
                *COMMAND,
            ],
            "render: not for a rendered job: --print-env (simulate's option: `malaunch simulate "
            "--print-env` prints each node's environment)",
        ),
        (
            [
                "volcano",
                "--nodes",
                "3",
                "--image",
                "i",
                "--framework",
                "tensorflow_ps",
                "--num-workers",
                "3",
                "--dry-run",
                *COMMAND,
            ],
            "render: not for a rendered job: --dry-run (every pod would print its plan and "
            "exit 0); --num-workers (it plans a whole cluster on one machine; the manifest "
            "describes the cluster with --nodes and --num-ps)",
        ),
        (
            [
                "tfjob",
                "--nodes",
                "2",
                "--image",
                "i",
                "--framework",
                "tensorflow_ps",
                "--success-policy",
                "chief",
                *COMMAND,
            ],
            "--success-policy chief: the rendered job has no chief task; add --chief",
        ),
        (
            [
                "ascendjob",
                "--nodes",
                "2",
                "--image",
                "i",
                "--framework",
                "mindspore",
                "--accelerator-type",
                "ascend-9000",
                *COMMAND,
            ],
            "--accelerator-type: 'ascend-9000' is not one of ascend-910b, ascend-910, "
            "ascend-npu, ascend-310P, ascend-310 (did you mean ascend-910?)",
        ),
    ],
)
def test_usage_errors_are_one_line_exit_64(args: List[str], message: str) -> None:
    result = run_cli(["render", *args])
    assert (result.code, result.stdout) == (64, "")
    assert result.stderr == f"malaunch: error: {message}\n"
