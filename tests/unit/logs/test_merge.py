"""Merging every rank log in arrival order, poll after poll: ties, unindexed logs, files,
attempts, node directories and new runs that appear while following."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

from logs.rundir import MakeNode, NodeDir
from malaunch.logs.merge import LogSet
from malaunch.logs.select import Selection
from malaunch.rankspec import parse_rank_spec
from malaunch.supervisor.runs import INDEX


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def printed(logs: LogSet, final: bool = True) -> List[str]:
    return "".join(logs.texts(final)).splitlines()


def two_ranks(make_node: MakeNode, name: str = "run", node: int = 0) -> NodeDir:
    return make_node(name, node=node).attempt(("worker", 2 * node, 0), ("worker", 2 * node + 1, 1))


def test_lines_merge_by_arrival_time_across_ranks(make_node: MakeNode) -> None:
    run = two_ranks(make_node)
    run.chunk(1, b"b1\n", 1.0)
    run.chunk(0, b"a1\na2\n", 2.0)
    run.chunk(1, b"b2\n", 3.0)
    run.chunk(0, b"a3\n", 4.0)
    assert printed(LogSet([run.path], Selection())) == [
        "[node 0 rank 1] b1", "[node 0 rank 0] a1", "[node 0 rank 0] a2",
        "[node 0 rank 1] b2", "[node 0 rank 0] a3",
    ]  # fmt: skip


def test_ties_keep_file_order_then_line_order(make_node: MakeNode) -> None:
    run = two_ranks(make_node)
    run.chunk(1, b"b1\nb2\n", 5.0)
    run.chunk(0, b"a1\n", 5.0)
    run.chunk(1, b"b3\n", 5.0)
    run.chunk(0, b"a2\n", 5.0)
    assert [line[-2:] for line in printed(LogSet([run.path], Selection()))] == [
        "a1", "a2", "b1", "b2", "b3",
    ]  # fmt: skip


def test_timestamps_the_program_printed_are_not_used(make_node: MakeNode) -> None:
    run = two_ranks(make_node)
    run.chunk(0, b"2020-01-01 late\n", 2.0)
    run.chunk(1, b"2030-01-01 early\n", 1.0)
    assert [line.split()[-1] for line in printed(LogSet([run.path], Selection()))] == [
        "early", "late",
    ]  # fmt: skip


def test_a_log_without_records_comes_after_indexed_lines_in_file_order(
    make_node: MakeNode,
) -> None:
    old = make_node("old").attempt(("worker", 0, 0), ("worker", 1, 1))
    old.chunk(1, b"old b\n", 0.0, indexed=False)
    old.chunk(0, b"old a\n", 0.0, indexed=False)
    new = two_ranks(make_node, "new", node=1)
    new.chunk(0, b"new\n", 9.0)
    assert printed(LogSet([old.path, new.path], Selection())) == [
        "[node 1 rank 2] new", "[node 0 rank 0] old a", "[node 0 rank 1] old b",
    ]  # fmt: skip


def test_nodes_merge_and_filters_apply(make_node: MakeNode) -> None:
    parent = make_node("sim", source="simulate-volcano").attempt(("node", 0, None))
    parent.chunk(0, b"console copy, not a rank log\n", 0.5)
    nodes = [two_ranks(make_node, f"sim/node-{k}", node=k) for k in (0, 1)]
    for rank in range(4):
        nodes[rank // 2].chunk(rank % 2, b"line %d\n" % rank, 4.0 - rank)
    assert printed(LogSet([parent.path], Selection())) == [
        "[node 1 rank 3] line 3", "[node 1 rank 2] line 2",
        "[node 0 rank 1] line 1", "[node 0 rank 0] line 0",
    ]  # fmt: skip
    ranks = Selection(ranks=parse_rank_spec("0,3", "--ranks"))
    assert printed(LogSet([parent.path], ranks)) == [
        "[node 1 rank 3] line 3", "[node 0 rank 0] line 0",
    ]  # fmt: skip
    node = Selection(nodes=parse_rank_spec("1", "--nodes"))
    assert printed(LogSet([parent.path], node)) == [
        "[node 1 rank 3] line 3", "[node 1 rank 2] line 2",
    ]  # fmt: skip


def test_following_sees_each_line_once_and_new_lines_later(make_node: MakeNode) -> None:
    run = two_ranks(make_node)
    run.chunk(0, b"a1\na2 unfin", 1.0)
    logs = LogSet([run.path], Selection())
    assert printed(logs, final=False) == ["[node 0 rank 0] a1"]
    assert printed(logs, final=False) == []
    run.chunk(0, b"ished\n", 2.0)
    run.chunk(1, b"b1\n", 1.5)
    # The line started in the chunk that arrived at 1.0, before b1's.
    assert printed(logs, final=False) == ["[node 0 rank 0] a2 unfinished", "[node 0 rank 1] b1"]


def test_a_file_listed_later_and_a_new_attempt_are_followed(make_node: MakeNode) -> None:
    run = make_node().attempt(("worker", 0, 0))
    run.chunk(0, b"attempt 0\n", 1.0)
    logs = LogSet([run.path], Selection())
    assert printed(logs, final=False) == ["[node 0 rank 0] attempt 0"]
    run.attempt(("worker", 0, 0), ("worker", 1, 1))
    run.chunk(1, b"new file\n", 2.0)
    run.chunk(0, b"attempt 1\n", 3.0)
    assert printed(logs, final=False) == ["[node 0 rank 1] new file", "[node 0 rank 0] attempt 1"]


def test_records_of_a_file_the_manifest_lists_only_later_are_kept(make_node: MakeNode) -> None:
    run = make_node().attempt(("worker", 0, 0))
    logs = LogSet([run.path], Selection())
    assert printed(logs, final=False) == []
    run.files.append(str(run.path / "worker-1.log"))
    run.chunk(1, b"early\n", 1.0)  # record and data before the manifest names the file
    assert printed(logs, final=False) == []
    run.files.pop()
    run.attempt(("worker", 0, 0), ("worker", 1, 1))
    assert printed(logs, final=False) == ["[node 0 rank 1] early"]


def test_a_node_dir_that_appears_later_is_found(make_node: MakeNode) -> None:
    parent = make_node("sim", source="simulate-octopus").attempt(("node", 0, None))
    clock = Clock()
    logs = LogSet([parent.path], Selection(), clock=clock)
    assert printed(logs, final=False) == []
    node = two_ranks(make_node, "sim/node-1", node=1)
    node.chunk(0, b"hello\n", 1.0)
    assert printed(logs, final=False) == []  # not looked for again yet
    clock.now = 1.0
    assert printed(logs, final=False) == ["[node 1 rank 2] hello"]


def test_a_new_run_in_the_same_dir_starts_over(make_node: MakeNode) -> None:
    run = two_ranks(make_node)
    run.chunk(0, b"first run, a long line\n", 1.0)
    logs = LogSet([run.path], Selection())
    assert printed(logs, final=False) == ["[node 0 rank 0] first run, a long line"]
    for name in [Path(run.files[0]), run.path / INDEX]:
        os.unlink(name)  # what the next launcher does first
    run.sizes.clear()
    run.chunk(0, b"second run\n", 7.0)
    assert printed(logs, final=False) == []  # the poll that notices starts over
    assert printed(logs, final=False) == ["[node 0 rank 0] second run"]


def test_nothing_to_read_is_no_output(tmp_path: Path, make_node: MakeNode) -> None:
    run = two_ranks(make_node)
    assert printed(LogSet([run.path], Selection())) == []
