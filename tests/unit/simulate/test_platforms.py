"""The pure parts of ``malaunch simulate``: platform fabrication, option forwarding, the writer."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List

import click
import pytest

from malaunch.cli.simulate import option_tokens
from malaunch.simulate.platforms import (
    JobShape,
    default_platform,
    fabricate,
    loopback,
    partial_table,
    template2_table,
)
from malaunch.simulate.ranktable_writer import write_json
from malaunch.simulate.run import base_environ


def ports() -> Iterator[int]:
    return itertools.count(40000)


def shape(tmp_path: Path, platform: str, **extra: Any) -> JobShape:
    values: Dict[str, Any] = {
        "platform": platform,
        "nodes": 2,
        "nproc_per_node": 2,
        "root": tmp_path / "root",
        "log_dir": tmp_path / "logs",
        "job_uuid": "abc123",
    }
    values.update(extra)
    return JobShape(**values)


def test_loopback_addresses_are_distinct_and_in_127_0_0_0_8() -> None:
    assert [loopback(k) for k in (0, 1, 254, 255, 256)] == [
        "127.0.0.1",
        "127.0.0.2",
        "127.0.0.255",
        "127.0.1.0",
        "127.0.1.1",
    ]


def test_template2_lists_pods_last_first_with_consecutive_devices(tmp_path: Path) -> None:
    table = template2_table(shape(tmp_path, "modelarts", first_device_id=4), ["a", "b"])
    group = table["group_list"][0]
    assert (table["status"], table["group_count"]) == ("completed", "1")
    assert (group["device_count"], group["instance_count"]) == ("4", "2")
    pods = [i["pod_name"] for i in group["instance_list"]]
    assert pods == ["modelarts-job-abc123-worker-1", "modelarts-job-abc123-worker-0"]
    assert [i["server_id"] for i in group["instance_list"]] == ["b", "a"]
    devices = group["instance_list"][0]["devices"]
    assert [d["device_id"] for d in devices] == ["4", "5"]
    all_ips = [d["device_ip"] for i in group["instance_list"] for d in i["devices"]]
    assert len(set(all_ips)) == 4


def test_partial_table_is_initializing_with_one_instance(tmp_path: Path) -> None:
    table = template2_table(shape(tmp_path, "modelarts", nodes=3), ["a", "b", "c"])
    partial = partial_table(table)
    assert partial["status"] == "initializing"
    assert len(partial["group_list"][0]["instance_list"]) == 1
    assert partial["group_list"][0]["instance_count"] == "3"
    assert len(table["group_list"][0]["instance_list"]) == 3  # the original is untouched


def test_modelarts_cluster_has_a_rank_table_per_node_and_a_master_port(tmp_path: Path) -> None:
    cluster = fabricate(shape(tmp_path, "modelarts"), ports())
    root = tmp_path / "root"
    assert cluster.rank_table_files == (
        root / "node-0" / "config" / "jobstart_hccl.json",
        root / "node-1" / "config" / "jobstart_hccl.json",
    )
    assert cluster.master_port == 40000
    assert [n.env["RANK_TABLE_FILE"] for n in cluster.nodes] == [
        str(root / "node-0" / "config"),
        str(root / "node-1" / "config"),
    ]
    assert root / "node-1" / "mount" in cluster.directories
    assert [n.log_dir for n in cluster.nodes] == [
        tmp_path / "logs" / "node-0",
        tmp_path / "logs" / "node-1",
    ]


def test_octopus_gets_its_port_from_vc_worker_port_not_the_launcher(tmp_path: Path) -> None:
    cluster = fabricate(shape(tmp_path, "octopus"), ports())
    assert cluster.master_port is None
    assert {n.env["VC_WORKER_PORT"] for n in cluster.nodes} == {"40000"}
    assert cluster.rank_table is None
    created = set(cluster.directories)
    for node in cluster.nodes:
        for name in ("DATASET", "CACHED_DATASET", "RESULT", "MODEL"):
            assert Path(node.env[name]) in created
        for path in json.loads(node.env["DATASET_MAP"]).values():
            assert Path(path) in created


def test_volcano_passes_the_process_count_to_the_launcher(tmp_path: Path) -> None:
    cluster = fabricate(shape(tmp_path, "volcano", nproc_per_node=3), ports())
    assert [n.launcher_args for n in cluster.nodes] == [("--nproc-per-node", "3")] * 2
    assert not any(key.startswith("MA_") for n in cluster.nodes for key in n.env)


def test_tf_ps_gives_each_task_its_own_node(tmp_path: Path) -> None:
    cluster = fabricate(shape(tmp_path, "tf-ps", nodes=2, num_ps=2), ports())
    assert [n.label for n in cluster.nodes] == [
        "ps 0",
        "ps 1",
        "worker 0",
        "worker 1",
    ]
    env = cluster.nodes[3].env
    assert env["TF_PS_HOSTS"] == "127.0.0.1:40000,127.0.0.2:40001"
    assert env["TF_WORKER_HOSTS"] == "127.0.0.3:40002,127.0.0.4:40003"
    assert (env["MA_TASK_NAME"], env["VC_TASK_INDEX"]) == ("worker", "1")
    assert env["MA_CURRENT_INSTANCE_NAME"] == "modelarts-job-abc123-worker-1"
    assert "MA_NUM_GPUS" not in env
    assert "TF_CHIEF_HOSTS" not in env


def test_tf_ps_with_a_chief_puts_it_first(tmp_path: Path) -> None:
    job = shape(tmp_path, "tf-ps", nodes=2, num_ps=1, chief=True)
    cluster = fabricate(job, ports())
    assert [n.label for n in cluster.nodes] == ["chief 0", "ps 0", "worker 0", "worker 1"]
    assert job.node_count == 4
    for node in cluster.nodes:
        assert node.env["TF_CHIEF_HOSTS"] == "127.0.0.1:40000"
        assert node.env["TF_PS_HOSTS"] == "127.0.0.2:40001"
        assert node.env["TF_WORKER_HOSTS"] == "127.0.0.3:40002,127.0.0.4:40003"
    chief = cluster.nodes[0].env
    assert (chief["MA_TASK_NAME"], chief["VC_TASK_INDEX"]) == ("chief", "0")
    assert chief["MA_CURRENT_INSTANCE_NAME"] == "modelarts-job-abc123-chief-0"


def test_the_default_platform_serves_every_framework() -> None:
    assert default_platform("torch_ddp")[0] == default_platform("mindspore")[0] == "volcano"
    assert default_platform("echo")[0] == "volcano"  # a third-party framework of plain hosts
    assert default_platform("tensorflow_ps")[0] == "tf-ps"  # ps and worker roles, one node each


def option(*decls: str, **attrs: Any) -> click.Option:
    return click.Option(list(decls), **attrs)


@pytest.mark.parametrize(
    ("param", "value", "tokens"),
    [
        (option("--grace-period", type=float), 1.5, ["--grace-period", "1.5"]),
        (option("-f", "--framework"), "torch_ddp", ["--framework", "torch_ddp"]),
        (option("--dry-run", is_flag=True), True, ["--dry-run"]),
        (option("--dry-run", is_flag=True), False, []),
        (option("--tf-flags/--no-tf-flags", default=True), False, ["--no-tf-flags"]),
        (option("--env", multiple=True), ("A=b=c", "D=e"), ["--env", "A=b=c", "--env", "D=e"]),
        (option("--pair", nargs=2), ("a", "b"), ["--pair", "a", "b"]),
        (option("-v", count=True), 2, ["-v", "-v"]),
    ],
)
def test_option_tokens_give_the_parsed_value_back(
    param: click.Option, value: Any, tokens: List[str]
) -> None:
    assert option_tokens(param, value) == tokens
    command = click.Command("x", params=[param], callback=lambda **kw: kw)
    parsed = command.main(tokens, standalone_mode=False)
    assert parsed[param.name] == value


def test_base_environ_drops_what_a_platform_injects() -> None:
    environ = {
        "PATH": "/bin",
        "TF_CPP_MIN_LOG_LEVEL": "1",
        "MALAUNCH_FRAMEWORK": "torch_ddp",
        "MA_NUM_GPUS": "8",
        "VC_TASK_INDEX": "3",
        "TF_CONFIG": "{}",
        "RANK_TABLE_FILE": "/user/config",
        "RANK": "2",
        "DATASET_MAP": "{}",
        "MALAUNCH_CONTEXT": "{}",
    }
    assert base_environ(environ) == {
        "PATH": "/bin",
        "TF_CPP_MIN_LOG_LEVEL": "1",
        "MALAUNCH_FRAMEWORK": "torch_ddp",
    }


def test_write_json_replaces_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "jobstart_hccl.json"
    target.write_text("{half", encoding="utf-8")
    write_json(target, {"status": "completed"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"status": "completed"}
    assert [p.name for p in tmp_path.iterdir()] == ["jobstart_hccl.json"]
