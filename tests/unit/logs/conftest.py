"""Fixtures for the ``malaunch logs`` tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from logs.rundir import MakeNode, NodeDir


@pytest.fixture
def make_node(tmp_path: Path) -> MakeNode:
    """Make a node directory under tmp_path: ``make_node(name, node=0, source="local")``."""

    def make(name: str = "run", node: int = 0, source: str = "local") -> NodeDir:
        return NodeDir(tmp_path / name, node, source)

    return make
