"""``malaunch topology``: the installed command on fixture environments, through subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from malaunch.testing import clean_env, read_env_file, run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures"
SHARED = FIXTURES / "shared"
TF_CONFIG_INDEX_5 = json.dumps(
    {"cluster": {"worker": ["w0:1", "w1:1", "w2:1"]}, "task": {"type": "worker", "index": 5}}
)


@pytest.fixture
def base(tmp_path: Path) -> Dict[str, str]:
    """A clean environment whose /etc/volcano is an empty folder, run from tmp_path."""
    return clean_env({"MALAUNCH_VOLCANO_DIR": str(tmp_path)})


def fixture_env(base: Dict[str, str], path: Path, **extra: str) -> Dict[str, str]:
    return {**base, **read_env_file(path), **extra}


def topology_json(env: Dict[str, str], *args: str) -> Dict[str, Any]:
    result = run_cli(["topology", "--json", *args], env=env)
    assert result.code == 0, result.stderr
    loaded: Dict[str, Any] = json.loads(result.stdout)
    return loaded


def test_volcano_summary(base: Dict[str, str]) -> None:
    result = run_cli(["topology"], env=fixture_env(base, SHARED / "volcano_env_3workers.env"))
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "source:      volcano" in lines
    assert "job id:      job-demo" in lines
    assert "nodes:       3 (this node: 1)" in lines
    assert "master:      job-demo-worker-0.job-demo:-" in lines
    assert " * node 1: job-demo-worker-1.job-demo rank 1 on device 0" in lines
    assert result.stderr == ""


def test_tf_ps_json(base: Dict[str, str]) -> None:
    topo = topology_json(fixture_env(base, SHARED / "tf_ps_env_2ps_3workers.env"))
    assert topo["source"] == "tf-ps"
    assert topo["task"] == {"role": "worker", "index": 1}
    assert topo["node_rank"] == 3
    assert topo["roles"]["ps"] == ["job-tf-ps-0.job-tf:2222", "job-tf-ps-1.job-tf:2222"]
    assert topo["master_addr"] == "job-tf-worker-0.job-tf"


def test_named_source_overrides_auto(base: Dict[str, str]) -> None:
    env = fixture_env(base, SHARED / "tf_ps_env_2ps_3workers.env")
    assert topology_json(env, "--topology", "tf-config")["source"] == "tf-config"
    volcano = topology_json(env, "--topology", "volcano")
    assert volcano["source"] == "volcano"
    assert volcano["node_rank"] == 1
    local = topology_json(env, "--topology", "local", "--nproc-per-node", "3")
    assert local["source"] == "local"
    assert len(local["nodes"][0]["devices"]) == 3


def test_tf_config_from_the_kubeflow_example(base: Dict[str, str]) -> None:
    raw = (SHARED / "tf_config_example.json").read_text()
    topo = topology_json({**base, "TF_CONFIG": raw})
    assert topo["source"] == "tf-config"
    assert topo["task"] == {"role": "worker", "index": 2}
    assert topo["master_addr"] == "tfjob-demo-chief-0.default.svc"


def test_modelarts_env_as_volcano(base: Dict[str, str]) -> None:
    env = fixture_env(base, SHARED / "modelarts_ascend_env_example.env")
    topo = topology_json(env, "--topology", "volcano")
    assert topo["node_rank"] == 0
    assert [len(node["devices"]) for node in topo["nodes"]] == [8, 8]
    assert topo["job_id"] == "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001"


def test_octopus_shows_data_and_warns_about_missing_paths(base: Dict[str, str]) -> None:
    result = run_cli(["topology"], env=fixture_env(base, SHARED / "octopus_env_example.env"))
    assert result.code == 0, result.stderr
    assert "master:      modelarts-job-0d3c5a9e-0000-4000-8000-00000000000f-worker-0." in (
        result.stdout
    )
    assert ":6060" in result.stdout
    assert "dataset_map: incr-dataset-1 -> /home/ma-user/datasets/dataset-0" in result.stdout
    # Seven paths are missing here (dataset, three map entries, cached, model, result): the
    # first three are named, the rest counted.
    assert result.stderr.splitlines() == [
        "malaunch: warning: data path does not exist here: /home/ma-user/datasets",
        "malaunch: warning: data path does not exist here: /home/ma-user/datasets/dataset-0",
        "malaunch: warning: data path does not exist here: /home/ma-user/datasets/dataset-1",
        "malaunch: warning: ... and 4 more data paths that do not exist here",
    ]


def test_mounted_host_file(base: Dict[str, str]) -> None:
    env = fixture_env(
        base,
        FIXTURES / "env" / "volcano_hosts_file_only.env",
        MALAUNCH_VOLCANO_DIR=str(SHARED / "etc_volcano_3workers"),
    )
    topo = topology_json(env)
    assert topo["source"] == "volcano"
    assert topo["node_rank"] == 2
    assert [d["rank"] for d in topo["nodes"][2]["devices"]] == [4, 5]


def test_local_when_nothing_is_set(base: Dict[str, str]) -> None:
    topo = topology_json(base, "--nproc-per-node", "2")
    assert topo["source"] == "local"
    assert topo["master_addr"] == "127.0.0.1"
    assert isinstance(topo["master_port"], int)
    assert topo["job_id"].startswith("malaunch-")


@pytest.mark.parametrize(
    ("env", "args", "code", "message"),
    [
        (
            {"TF_PS_HOSTS": "a:1", "TF_WORKER_HOSTS": "host-a:2222,host-b", "MA_TASK_NAME": "ps"},
            [],
            65,
            'TF_WORKER_HOSTS item 2 "host-b": expected host:port',
        ),
        (
            {"TF_CONFIG": TF_CONFIG_INDEX_5},
            [],
            65,
            "TF_CONFIG: task.index: 5 is out of range for worker (3 tasks)",
        ),
        (
            {"VC_WORKER_HOSTS": "a,b,c", "VC_TASK_INDEX": "1", "MA_NUM_HOSTS": "4"},
            [],
            65,
            "MA_NUM_HOSTS=4 does not match VC_WORKER_HOSTS, which lists 3 hosts",
        ),
        (
            {"DATASET_MAP": "[1]"},
            [],
            65,
            "DATASET_MAP: expected a JSON object of dataset name to path, got an array",
        ),
        (
            {"ASCEND_RT_VISIBLE_DEVICES": "0, 1"},
            [],
            65,
            'ASCEND_RT_VISIBLE_DEVICES="0, 1": item 2 " 1" is not a device id '
            "(expected ascending integers without spaces, e.g. 0,1,2,3)",
        ),
        (
            {"VC_TASK_INDEX": "0"},
            ["--topology", "volcano"],
            66,
            "VC_WORKER_HOSTS is not set and neither {dir}/worker.host nor {dir}/VC_WORKER_HOSTS "
            "exists",
        ),
        (
            {},
            ["--topology", "nonesuch"],
            78,
            "--topology: unknown topology source 'nonesuch' (installed: {installed}, or auto); "
            "see `malaunch plugins`",
        ),
    ],
)
def test_bad_input_is_one_line_and_an_exit_code(
    base: Dict[str, str], env: Dict[str, str], args: list[str], code: int, message: str
) -> None:
    result = run_cli(["topology", *args], env={**base, **env})
    assert result.code == code
    assert result.stdout == ""
    installed = ", ".join(sorted(topology_names(base))) if "{installed}" in message else ""
    expected = message.format(dir=base["MALAUNCH_VOLCANO_DIR"], installed=installed)
    assert result.stderr.splitlines() == [f"malaunch: error: {expected}"]


def topology_names(env: Dict[str, str]) -> list[str]:
    result = run_cli(["plugins", "--json"], env=env)
    assert result.code == 0, result.stderr
    return [row["name"] for row in json.loads(result.stdout) if row["kind"] == "topology"]
