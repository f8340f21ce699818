"""The command-line options the tensorflow_ps framework adds to ``malaunch``."""

from __future__ import annotations

from typing import List

import click

from malaunch.api import Integer

MAX_LOCAL_TASKS = 512


def cli_options() -> List[click.Option]:
    """Fresh option objects (the CLI prefixes their help with ``[tensorflow_ps]``)."""
    return [
        click.Option(
            ["--tf-flags/--no-tf-flags"],
            default=True,
            show_default=False,
            help="Append --ps_hosts --worker_hosts --job_name --task_index to the command "
            "(on by default; TF_CONFIG is always set).",
        ),
        click.Option(
            ["--num-ps"],
            # Every local task's TF_CONFIG lists the whole cluster, so the plan grows with the
            # square of the task count: local mode is for trying a job, not for 10,000 tasks.
            type=Integer(0, MAX_LOCAL_TASKS),
            default=None,
            help="Local mode: run this many ps tasks here on free loopback ports [default: 1 "
            "when --num-workers is given].",
        ),
        click.Option(
            ["--num-workers"],
            type=Integer(1, MAX_LOCAL_TASKS),
            default=None,
            help="Local mode: run this many worker tasks here [default: the local process "
            "count when --num-ps is given].",
        ),
    ]
