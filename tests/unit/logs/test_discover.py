"""Finding node directories and their rank logs: plain, simulate, collected, moved, broken."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from logs.rundir import MakeNode
from malaunch.errors import MissingInputError
from malaunch.logs.discover import Discovery, RankLog, load_manifest, rank_logs, require_runs
from malaunch.supervisor.runs import MANIFEST


def log(role: str, rank: object = None, local_rank: object = None, node: int = 2) -> RankLog:
    return RankLog(node, 0, Path("x"), role, rank, local_rank)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("entry", "label"),
    [
        (log("worker", 3, 1), "node 2 rank 3"),
        (log("ps", None, 0), "node 2 ps 0"),
        (log("chief", 0, 0), "node 2 chief 0"),
        (log("scheduler"), "node 2 scheduler"),
    ],
)
def test_labels_are_the_launchers_names_with_the_node(entry: RankLog, label: str) -> None:
    assert entry.label == label


def test_a_simulate_dir_gives_its_node_dirs_not_its_own_node_logs(make_node: MakeNode) -> None:
    parent = make_node("sim", source="simulate-volcano").attempt(("node", 0, None))
    nodes = [make_node(f"sim/node-{k}", node=k).attempt(("worker", k, 0)) for k in (1, 0)]
    found = Discovery([parent.path]).node_dirs()
    assert found == [nodes[1].path, nodes[0].path]  # in name order


def test_collected_node_dirs_two_levels_down_each_once(make_node: MakeNode) -> None:
    a = make_node("shared/job/host-a").attempt(("worker", 0, 0))
    b = make_node("shared/job/host-b", node=1).attempt(("worker", 1, 0))
    make_node("shared/job/host-b/deeper/x").attempt(("worker", 9, 0))  # inside a node dir
    root = a.path.parents[1]
    assert Discovery([root, a.path, root]).node_dirs() == [a.path, b.path]


def test_three_levels_down_is_too_far(make_node: MakeNode) -> None:
    deep = make_node("one/two/three").attempt(("worker", 0, 0))
    assert Discovery([deep.path.parents[2]]).node_dirs() == []


def test_a_root_without_any_manifest_is_66_naming_it(tmp_path: Path) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(MissingInputError, match=r"empty: no malaunch-run.json here or in its sub"):
        require_runs([tmp_path / "empty"])
    with pytest.raises(MissingInputError, match=r"nothere: no such log directory"):
        require_runs([tmp_path / "nothere"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(MissingInputError, match=r"file: not a directory"):
        require_runs([tmp_path / "file"])


def test_a_manifest_that_is_not_json_is_no_manifest(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text("{not json")
    assert load_manifest(tmp_path) is None
    (tmp_path / MANIFEST).write_text("[1, 2]")
    assert load_manifest(tmp_path) is None
    assert Discovery([tmp_path]).node_dirs() == []
    require_runs([tmp_path])  # a manifest being written: following may read it later


def test_a_simulate_dir_before_its_nodes_wrote_theirs_is_a_run(make_node: MakeNode) -> None:
    parent = make_node("sim", source="simulate-volcano").attempt(("node", 0, None))
    (parent.path / "node-0").mkdir()
    require_runs([parent.path])
    assert Discovery([parent.path]).node_dirs() == []


def test_rank_logs_take_the_latest_attempts_process(make_node: MakeNode) -> None:
    run = make_node(node=1).attempt(("worker", 0, 0), ("ps", None, 0))
    run.attempt(("worker", 0, 0), ("ps", None, 0), ("worker", 1, 1))
    logs = rank_logs(run.path, load_manifest(run.path) or {})
    assert [(entry.file_id, entry.label) for entry in logs] == [
        (0, "node 1 rank 0"), (1, "node 1 ps 0"), (2, "node 1 rank 1"),
    ]  # fmt: skip
    assert logs[0].path == run.path / "worker-0.log"


def test_a_moved_directory_reads_its_own_files(make_node: MakeNode, tmp_path: Path) -> None:
    run = make_node("before").attempt(("worker", 0, 0))
    run.chunk(0, b"x\n", 1.0)
    moved = tmp_path / "after"
    shutil.move(str(run.path), moved)
    (logs,) = rank_logs(moved, load_manifest(moved) or {})
    assert logs.path == moved / "worker-0.log"


def test_a_file_elsewhere_is_read_where_the_manifest_says(make_node: MakeNode) -> None:
    run = make_node()
    elsewhere = run.path.parent / "elsewhere.log"
    elsewhere.write_text("x\n")
    manifest = {"files": [str(elsewhere)], "attempts": [{"processes": [{"file": 0}]}]}
    (logs,) = rank_logs(run.path, manifest)
    assert logs.path == elsewhere and logs.label == "node 0 process"


def test_garbage_in_a_manifest_is_skipped(make_node: MakeNode) -> None:
    run = make_node()
    manifest = json.loads(
        '{"node": true, "files": ["a.log", 7, "b.log", "c.log"], "attempts": [1, {"processes":'
        ' [2, {"file": "0"}, {"file": 1}, {"file": 2, "role": 5, "rank": 1.5}]}]}'
    )
    assert [(e.file_id, e.label) for e in rank_logs(run.path, manifest)] == [(2, "node 0 process")]
    assert rank_logs(run.path, {"files": "nope"}) == []


OLD, NEW = "run-20260101-000000-000aaa", "run-20260102-000000-000bbb"


def test_a_log_dir_stands_for_its_latest_run_at_every_level(
    make_node: MakeNode, tmp_path: Path
) -> None:
    """A folder of collected node log dirs, each keeping runs: only each node's latest run is
    read, never an older run beside it."""
    latest = {}
    for node in (0, 1):
        make_node(f"job/host{node}/{OLD}", node=node).attempt(("worker", node, 0))
        latest[node] = make_node(f"job/host{node}/{NEW}", node=node).attempt(("worker", node, 0))
    (tmp_path / "job" / "host0" / "latest").symlink_to(NEW)  # host1 has no pointer: newest
    found = Discovery([tmp_path / "job"]).node_dirs()
    assert found == [latest[0].path, latest[1].path]
    assert Discovery([tmp_path / "job" / "host0"]).node_dirs() == [latest[0].path]
    assert Discovery([tmp_path / "job" / "host0" / OLD]).node_dirs() != found[:1]


def test_following_a_log_dir_moves_to_its_newer_run(make_node: MakeNode, tmp_path: Path) -> None:
    old = make_node(f"logs/{OLD}").attempt(("worker", 0, 0))
    discovery = Discovery([tmp_path / "logs"])
    assert discovery.node_dirs() == [old.path]
    new = tmp_path / "logs" / NEW
    new.mkdir()  # made by a launch still waiting for its topology: not read yet
    assert discovery.node_dirs() == [old.path]
    make_node(f"logs/{NEW}").attempt(("worker", 0, 0))
    assert discovery.node_dirs() == [new]
