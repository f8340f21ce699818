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
    job_port: Optional[int] = None,
    **framework_options: Any,
) -> LaunchPlan:
    """The named framework's plan, found through the installed plugins as the CLI finds it.

    ``framework_options`` are the values of the framework's own options by their Python name
    (``ms_mode="dynamic"``); those left out get the value the launch command gives them by
    default (the option's declared default, as click converts it), so the plan always sees
    every option. ``environ`` is the launcher environment the plugin may read (default:
    empty); ``cwd`` is the launch directory (default: this process's); ``max_restarts`` is
    ``--max-restarts``; ``job_port`` the job channel's port (None: no channel). The plan is
    :func:`check_plan`-ed unless ``check=False``. Nothing is created on disk and core
    additions (``PYTHONUNBUFFERED``, ``--env``) are not applied.

    :raises TypeError: for a name that is none of the framework's options, or a required
        option left out.
    """
    loaded = plugins if plugins is not None else load_plugins(clean_env())
    chosen = loaded.framework(framework)
    known = sorted(option.name for option in chosen.options if option.name)
    unknown = sorted(set(framework_options) - set(known))
    if unknown:
        msg = (
            f"make_plan: framework {framework!r} has no option {unknown[0]!r} "
            f"(its options: {', '.join(known) or 'none'})"
        )
        raise TypeError(msg)
    options = PlanOptions(
        log_dir=str(log_dir),
        cwd=str(Path(cwd).absolute() if cwd is not None else Path.cwd()),
        environ=dict(environ or {}),
        framework_options=chosen.option_values(framework_options),
        max_restarts=max_restarts,
        job_port=job_port,
    )
    plan = chosen.plan(topology, list(command), options)
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
