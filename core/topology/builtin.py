"""Registers the built-in topology sources (declared as an entry point in pyproject.toml)."""

from __future__ import annotations

from typing import List

from malaunch.hookspecs import hookimpl
from malaunch.models import TopologySource


@hookimpl
def malaunch_register_topology_sources() -> List[TopologySource]:
    return []
