"""The core's own steps of the pipeline (malaunch.pipeline)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Sequence

import pytest

from malaunch.errors import ExitCode, PluginError
from malaunch.hookspecs import hookimpl
from malaunch.models import Framework, LaunchPlan, PlanOptions, ResolveOptions, Topology
from malaunch.pipeline import build_plan
from malaunch.plugins import Origin, load_plugins


def _plan_nothing(topology: Topology, command: Sequence[str], options: PlanOptions) -> LaunchPlan:
    return LaunchPlan(framework="idle", topology=topology, processes=())


class IdleFramework:
    @hookimpl
    def malaunch_register_frameworks(self) -> List[Framework]:
        return [Framework(name="idle", plan=_plan_nothing)]


def test_a_plan_without_processes_is_a_plugin_error(tmp_path: Path) -> None:
    plugins = load_plugins({}, extra=[(IdleFramework(), Origin("idle", "idle-dist", "1.0"))])
    with pytest.raises(PluginError) as info:
        build_plan(
            plugins,
            {},
            framework="idle",
            source="local",
            command=["python", "train.py"],
            resolve_options=ResolveOptions(log_dir=str(tmp_path)),
            plan_options=PlanOptions(log_dir=str(tmp_path), cwd=str(tmp_path)),
        )
    assert str(info.value) == (
        "framework 'idle' planned no process for node 0 of topology source 'local'"
    )
    assert info.value.exit_code == ExitCode.CONFIG
