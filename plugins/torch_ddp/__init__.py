"""The built-in `torch_ddp` framework plugin (hook implementations only)."""

from __future__ import annotations

from typing import List

from malaunch.api import Framework, hookimpl
from malaunch_torch_ddp import options, plan


@hookimpl
def malaunch_register_frameworks() -> List[Framework]:
    """PyTorch DDP: torchrun's per-rank environment, or torchrun itself per node."""
    return [
        Framework(
            name=plan.FRAMEWORK,
            plan=plan.plan,
            options=options.cli_options(),
            help="PyTorch DDP: torchrun-style env per rank (native) or one torchrun per node "
            "(delegate)",
            # What torchrun gives every worker and a node's own environment lacks (RANK and
            # WORLD_SIZE are also what platforms give a pod).
            launcher="torchrun",
            launcher_vars=("TORCHELASTIC_RUN_ID", "GROUP_RANK"),
            env_prefixes=("TORCHELASTIC_",),
        )
    ]
