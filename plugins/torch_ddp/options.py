"""The command-line options the torch_ddp framework adds to ``malaunch``."""

from __future__ import annotations

from typing import List

import click

from malaunch_torch_ddp.plan import MODES


def cli_options() -> List[click.Option]:
    """Fresh option objects (the CLI prefixes their help with ``[torch_ddp]``)."""
    return [
        click.Option(
            ["--torch-mode"],
            type=click.Choice(MODES),
            default="native",
            help="native: one process per rank with torchrun's environment; delegate: one "
            "`python -m torch.distributed.run` agent per node.",
        ),
        click.Option(
            ["--export-rank-table"],
            is_flag=True,
            default=False,
            help="Also give processes RANK_TABLE_FILE (switches torch_npu to rank-table "
            "initialisation).",
        ),
    ]
