"""The ``MALAUNCH_*`` variables: one that matches no option is named in a warning, with the
closest one's name (each option's own is shown in ``--help``: :mod:`malaunch.cli.command`).

click reads an option's twin through ``auto_envvar_prefix``: ``MALAUNCH_<OPTION>`` for the
launch command, ``simulate`` and ``render`` (which take the launch command's options), and
``MALAUNCH_<COMMAND>_<OPTION>`` for the other commands (``MALAUNCH_TOPOLOGY_LOG_DIR``). A
misspelt twin (``MALAUNCH_FRAMEWRK``) would otherwise be ignored without a word.
"""

from __future__ import annotations

from typing import Callable, Iterable, List, Mapping, Set

import click

from malaunch.log import logger
from malaunch.wording import closest

PREFIX = "MALAUNCH_"
# The variables that are no option's twin: those malaunch sets for the processes it starts,
# and those it (or the project's tests) reads for something else. docs/job.md lists them.
NOT_OPTIONS = {
    "MALAUNCH_CONTEXT": "set for every process: the job as malaunch.context reads it",
    "MALAUNCH_RESTART_COUNT": "set for every process: the attempt of the job",
    "MALAUNCH_HEARTBEAT": "set for every process with --hang-timeout: the launcher's socket",
    "MALAUNCH_HEARTBEAT_INTERVAL": "set with it: the seconds between two heartbeats",
    "MALAUNCH_VOLCANO_DIR": "read: Volcano's host-file folder instead of /etc/volcano",
    "MALAUNCH_DISABLE_PLUGINS": "read: entry-point names of plugins not to load",
    "MALAUNCH_UPDATE_GOLDEN": "the project's tests: rewrite the golden dry-run plans",
    "MALAUNCH_HOSTILE_EXAMPLES": "the project's tests: values per target of the hostile suite",
    "MALAUNCH_HOSTILE_RANDOM": "the project's tests: new values each run of the hostile suite",
}
# A malaunch started by a malaunch (a worker's, a simulated node's launcher) inherits the
# variables its parent was started with: its parent has warned about them already.
STARTED_BY_MALAUNCH = ("MALAUNCH_CONTEXT", "MALAUNCH_RESTART_COUNT")


def option_variables(command: click.Command, prefix: str = "MALAUNCH") -> Set[str]:
    """The variables click reads for the options of ``command`` and of its subcommands, as
    click names them under ``prefix`` (the command's ``auto_envvar_prefix``)."""
    found: Set[str] = set()
    for param in command.params:
        if not isinstance(param, click.Option) or not param.allow_from_autoenv:
            continue
        if isinstance(param.envvar, str):
            found.add(param.envvar)
        elif param.envvar:
            found.update(param.envvar)
        elif param.name:
            found.add(f"{prefix}_{param.name.upper()}")
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found |= option_variables(sub, f"{prefix}_{name.upper()}".replace("-", "_"))
    return found


def warn_about_variables(
    environ: Mapping[str, str], cheap: Set[str], everything: Callable[[], Set[str]]
) -> List[str]:
    """One warning for each ``MALAUNCH_*`` variable of ``environ`` that matches no option,
    naming the closest option variable; returns the variables warned about.

    ``cheap`` holds the variables of the command being run; ``everything()``, called only when
    a variable is not among them, those of every command (it builds ``simulate`` and
    ``render``, which a launch would not import otherwise).
    """
    if any(name in environ for name in STARTED_BY_MALAUNCH):
        return []
    unknown = [
        name
        for name in sorted(environ)
        if name.startswith(PREFIX) and name not in NOT_OPTIONS and name not in cheap
    ]
    if unknown:
        known = everything() | cheap
        unknown = [name for name in unknown if name not in known]
        for name in unknown:
            logger.warning(f"{name} matches no option of malaunch{_hint(name, known)}; ignored")
    return unknown


def _hint(name: str, known: Iterable[str]) -> str:
    # Compared without the prefix all share: MALAUNCH_FOO is not close to MALAUNCH_ENV.
    meant = closest(name[len(PREFIX) :], [k[len(PREFIX) :] for k in known])
    return f" (did you mean {PREFIX}{meant}?)" if meant is not None else ""
