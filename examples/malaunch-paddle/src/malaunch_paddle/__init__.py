"""Hook implementations of the paddle plugin: registration only, no logic."""

from __future__ import annotations

from typing import List

import click

from malaunch.api import Framework, Integer, hookimpl
from malaunch_paddle import plan


@hookimpl
def malaunch_register_frameworks() -> List[Framework]:
    """The ``paddle`` framework."""
    return [
        Framework(
            name=plan.NAME,
            plan=plan.plan,
            options=[
                click.Option(
                    ["--paddle-start-port"],
                    type=Integer(1024, 65535),
                    default=plan.DEFAULT_START_PORT,  # stated once: plans get it as given
                    help="First port of each node's trainer endpoints: local rank i listens "
                    "on this port + i (paddle.distributed.launch's --started_port).",
                )
            ],
            help="PaddlePaddle collective training: PADDLE_TRAINER_ID, PADDLE_TRAINER_ENDPOINTS "
            "... per trainer, as paddle.distributed.launch sets them",
            # What paddle.distributed.launch gives every trainer: where one is set, malaunch
            # runs inside a trainer, and --topology auto refuses to start a job there.
            launcher="paddle.distributed.launch",
            launcher_vars=plan.LAUNCHER_VARS,
            # The variables Paddle owns: malaunch.testing.clean_env keeps a developer's
            # PADDLE_* out of the tests' environment.
            env_prefixes=("PADDLE_",),
        )
    ]
