"""``malaunch simulate --print-env``: each node's environment and start command, for a shell.

The output is a file a shell can source and a person can paste from: one ``NAME=value`` line
per variable and a ``# launcher:`` line per node, every value and argument quoted by
:mod:`malaunch.shell`. ``set -a; . FILE`` exports exactly the values shown and runs nothing
else, whatever they hold; the launcher line, pasted after the ``# launcher:``, runs exactly the
node's command.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence

from malaunch import shell
from malaunch.errors import TopologyError
from malaunch.models import ProcessSpec
from malaunch.simulate.platforms import JobShape, SimCluster

# Variables the launcher sets for each process it starts: a node launcher must not inherit
# those of a launcher it runs under.
LAUNCHER_SET = ("MALAUNCH_VOLCANO_DIR", "MALAUNCH_CONTEXT", "MALAUNCH_RESTART_COUNT")


def render_env(
    shape: JobShape,
    cluster: SimCluster,
    specs: Sequence[ProcessSpec],
    environ: Mapping[str, str],
    written: bool = False,
) -> str:
    """Each node's environment (env-file form) and complete start command.

    The environment is the platform's variables plus the launcher options the user set as
    ``MALAUNCH_*`` variables (node launchers inherit those): with both, each command runs as
    that node in a shell of its own, or on a machine of its own. ``written``: the platform's
    files (directories, the completed rank table) are in place under ``--platform-dir``.
    """
    inherited = {
        key: value
        for key, value in environ.items()
        if key.startswith("MALAUNCH_") and key not in LAUNCHER_SET
    }
    lines: List[str] = []
    for node, spec in zip(cluster.nodes, specs):
        lines.append(f"# node {node.index}: {node.label} at {node.host} ({shape.platform})")
        lines += assignments({**inherited, **node.env})
        lines.append(f"# launcher: {shell.command_line(spec.argv)}")
        lines.append("")
    root = shell.quote(str(shape.root))
    if written:
        what = "the completed rank table and " if cluster.rank_table is not None else ""
        lines.append(f"# platform files: {what}the nodes' directories, written under {root}")
    elif cluster.directories:
        lines.append(
            "# platform files: not written; add --platform-dir DIR to create them (directories"
            + (", the rank table" if cluster.rank_table is not None else "")
            + ") so that these commands run as printed"
        )
    return "\n".join(lines).rstrip("\n")


def assignments(env: Dict[str, str]) -> List[str]:
    """``NAME=value`` lines, sorted by name; a name no shell can assign is refused (65)."""
    lines = []
    for name, value in sorted(env.items()):
        try:
            lines.append(shell.assignment(name, value))
        except ValueError as exc:
            msg = f"simulate --print-env: the environment variable {exc}; unset it first"
            raise TopologyError(msg) from exc
    return lines
