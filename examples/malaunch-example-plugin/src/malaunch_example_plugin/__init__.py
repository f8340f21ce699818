"""Hook implementations of the example plugin: registration only, no logic."""

from __future__ import annotations

from typing import List

import click

from malaunch.api import Framework, TopologySource, hookimpl
from malaunch_example_plugin import echo, static_file


@hookimpl
def malaunch_register_frameworks() -> List[Framework]:
    """The ``echo`` framework."""
    return [
        Framework(
            name=echo.NAME,
            plan=echo.plan,
            # Fresh option objects on every call; names must not clash with malaunch's own.
            options=[
                click.Option(
                    ["--echo-greeting"],
                    default=None,
                    metavar="TEXT",
                    help="Passed to every process as ECHO_GREETING.",
                )
            ],
            help="Example: one process per rank with ECHO_RANK / ECHO_WORLD_SIZE",
            # The variables it gives its processes: malaunch.testing.clean_env removes them
            # from the environment tests run in.
            env_prefixes=("ECHO_",),
        )
    ]


@hookimpl
def malaunch_register_topology_sources() -> List[TopologySource]:
    """The ``static-file`` source; it joins ``--topology auto`` when its variable is set."""
    return [
        TopologySource(
            name=static_file.NAME,
            resolve=static_file.resolve,
            detect=static_file.detect,
            auto_order=50,  # after the built-in platform sources, before local (1000)
            help=f"a JSON file named by {static_file.VAR}",
        )
    ]
