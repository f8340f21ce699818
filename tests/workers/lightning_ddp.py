"""A plain PyTorch Lightning DDP script, as a user writes it for torchrun (CPU, gloo).

    lightning_ddp.py OUT_DIR

``Trainer(strategy="ddp", num_nodes=2, devices=2, accelerator="cpu")`` picks its cluster
environment itself. Under torchrun (or malaunch, which gives the same worker contract) it must
be ``TorchElasticEnvironment``, which creates no processes: the launcher started all four.
Each rank writes what Lightning saw to OUT_DIR/rank-<global rank>.json after a short fit whose
gradients are all-reduced across the four ranks.
"""

from __future__ import annotations

import json
import os
import sys

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.environments.torchelastic import TorchElasticEnvironment
from pytorch_lightning.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset


class Regression(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> int:
    out = sys.argv[1]
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)
    trainer = pl.Trainer(
        strategy="ddp", num_nodes=2, devices=2, accelerator="cpu", max_epochs=1,
        logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False,
    )  # fmt: skip
    model = Regression()
    trainer.fit(model, data)
    strategy = trainer.strategy
    assert isinstance(strategy, DDPStrategy), type(strategy)
    environment = strategy.cluster_environment
    assert environment is not None
    weights = [float(v) for v in model.layer.weight.detach().flatten()]
    seen = {
        "environment": type(environment).__name__,
        "torchelastic": isinstance(environment, TorchElasticEnvironment),
        "creates_processes_externally": environment.creates_processes_externally,
        "is_torchelastic_launched": torch.distributed.is_torchelastic_launched(),
        "world_size": trainer.world_size,
        "global_rank": trainer.global_rank,
        "local_rank": trainer.local_rank,
        "node_rank": trainer.node_rank,
        "pid": os.getpid(),
        "weights": weights,  # DDP keeps them equal on every rank
    }
    with open(os.path.join(out, f"rank-{trainer.global_rank}.json"), "w") as handle:
        json.dump(seen, handle)
    print(f"rank {trainer.global_rank}/{trainer.world_size}: {seen['environment']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
