"""The command-line options the mindspore framework adds to ``malaunch``."""

from __future__ import annotations

from typing import List

import click

from malaunch.api import Integer
from malaunch_mindspore.plan import DEFAULT_SCHED_PORT, DEFAULT_TOPO_TIMEOUT, MODES


def cli_options() -> List[click.Option]:
    """Fresh option objects (the CLI prefixes their help with ``[mindspore]``)."""
    return [
        click.Option(
            ["--ms-mode"],
            type=click.Choice(MODES),
            default="auto",
            help="ranktable: one process per device from the HCCL rank table; dynamic: "
            "msrun-style scheduler + workers; auto: ranktable when the topology has one.",
        ),
        click.Option(
            ["--ms-sched-port"],
            type=Integer(1024, 65535),
            default=None,
            help=f"MS_SCHED_PORT of the dynamic cluster [default: --master-port or the "
            f"topology's port, else {DEFAULT_SCHED_PORT}]",
        ),
        click.Option(
            ["--ms-topo-timeout"],
            type=Integer(1, 7 * 24 * 3600),  # whole seconds: MindSpore reads an integer
            default=DEFAULT_TOPO_TIMEOUT,
            help="MS_TOPO_TIMEOUT: seconds the dynamic cluster waits for every worker.",
        ),
    ]
