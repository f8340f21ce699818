"""The ``malaunch`` pytest plugin (``pytest11`` entry point): fixtures only, so nothing
changes for a test suite that does not ask for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence

import pytest

from malaunch.models import LaunchPlan, Topology
from malaunch.plugins import PluginSet, load_plugins
from malaunch.testing.environment import clean_env
from malaunch.testing.planning import PlanFactory, make_plan


@pytest.fixture
def malaunch_env() -> Dict[str, str]:
    """:func:`clean_env`: this environment without platform variables, for ``run_cli``."""
    return clean_env()


@pytest.fixture(scope="session")
def _malaunch_plugins() -> PluginSet:
    return load_plugins(clean_env())


@pytest.fixture
def malaunch_plan(_malaunch_plugins: PluginSet, tmp_path: Path) -> PlanFactory:
    """:func:`make_plan` with the installed plugins loaded once and logs under ``tmp_path``."""

    def factory(
        framework: str,
        topology: Topology,
        command: Sequence[str] = ("python", "train.py"),
        **kwargs: Any,
    ) -> LaunchPlan:
        kwargs.setdefault("log_dir", tmp_path / "logs")
        return make_plan(framework, topology, command, plugins=_malaunch_plugins, **kwargs)

    return factory
