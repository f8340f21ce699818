"""A framework's plan through the installed plugins, as the CLI finds it (part of
``malaunch.testing``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Protocol, Sequence, Union

from malaunch.models import LaunchPlan, PlanOptions, Topology
from malaunch.plugins import PluginSet, load_plugins
from malaunch.testing.checks import check_plan
from malaunch.testing.environment import clean_env


def make_plan(
    framework: str,
    topology: Topology,
    command: Sequence[str] = ("python", "train.py"),
    *,
    log_dir: Union[str, Path] = "/tmp/malaunch-test-logs",
    cwd: Union[str, Path, None] = None,
    environ: Optional[Mapping[str, str]] = None,
    plugins: Optional[PluginSet] = None,
    check: bool = True,
    max_restarts: int = 0,
    **framework_options: Any,
) -> LaunchPlan:
    """The named framework's plan, found through the installed plugins as the CLI finds it.

    ``framework_options`` are the values of the framework's own options by their Python name
    (``ms_mode="dynamic"``); ``environ`` is the launcher environment the plugin may read
    (default: empty); ``cwd`` is the launch directory (default: this process's);
    ``max_restarts`` is ``--max-restarts``. The plan is
    :func:`check_plan`-ed unless ``check=False``. Nothing is created on disk and core
    additions (``PYTHONUNBUFFERED``, ``--env``) are not applied.
    """
    loaded = plugins if plugins is not None else load_plugins(clean_env())
    options = PlanOptions(
        log_dir=str(log_dir),
        cwd=str(Path(cwd).absolute() if cwd is not None else Path.cwd()),
        environ=dict(environ or {}),
        framework_options=framework_options,
        max_restarts=max_restarts,
    )
    plan = loaded.framework(framework).plan(topology, list(command), options)
    if check:
        check_plan(plan)
    return plan


class PlanFactory(Protocol):
    """The ``malaunch_plan`` fixture: ``(framework, topology, command, **kwargs) -> plan``."""

    def __call__(
        self,
        framework: str,
        topology: Topology,
        command: Sequence[str] = ...,
        **kwargs: Any,
    ) -> LaunchPlan: ...
