"""The built-in `mindspore` framework plugin (hook implementations only)."""

from __future__ import annotations

from typing import List

from malaunch.api import Framework, hookimpl
from malaunch_mindspore import options, plan


@hookimpl
def malaunch_register_frameworks() -> List[Framework]:
    """MindSpore: HCCL rank-table launch, or the msrun-style dynamic cluster."""
    return [
        Framework(
            name=plan.FRAMEWORK,
            plan=plan.plan,
            options=options.cli_options(),
            help="MindSpore: rank-table mode (one process per NPU) or dynamic cluster "
            "(scheduler + workers, runs on CPU too)",
            # msrun gives each worker MS_NODE_ID when it knows the worker's rank (--node_rank,
            # or one node); the ascend-operator gives pods MS_ROLE, MS_SCHED_HOST, ... too, but
            # never MS_NODE_ID (its pod rank is MS_NODE_RANK), so only that one shows msrun.
            launcher="msrun",
            launcher_vars=("MS_NODE_ID",),
            env_prefixes=("MS_",),
        )
    ]
