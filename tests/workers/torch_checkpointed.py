"""A real PyTorch DDP job (gloo, CPU) that checkpoints every step and resumes from the last
checkpoint: the job a replaced node must be able to finish.

    torch_checkpointed.py OUT_DIR [--steps N] [--step-seconds S]

Rank 0 saves ``OUT_DIR/checkpoint.pt`` (the model, the optimiser and the step) after every step,
atomically; every rank loads it at start when it exists. Each rank records its pid in
``OUT_DIR/<rank>-<attempt>.pid``, the step it resumed from in ``OUT_DIR/resumed-<rank>-<attempt>``
and each step done in ``OUT_DIR/step-<rank>`` (the latest), and writes the parameters' checksum
to ``OUT_DIR/done-<rank>`` when all N steps are done.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--step-seconds", type=float, default=0.3)
    args = parser.parse_args()
    rank, attempt = int(os.environ["RANK"]), int(os.environ["MALAUNCH_RESTART_COUNT"])
    with open(os.path.join(args.out, f"{rank}-{attempt}.pid"), "w") as handle:
        handle.write(str(os.getpid()))
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(4, 1))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    path = os.path.join(args.out, "checkpoint.pt")
    first = 0
    if os.path.exists(path):
        state = torch.load(path, weights_only=True)
        model.module.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        first = int(state["step"]) + 1
    with open(os.path.join(args.out, f"resumed-{rank}-{attempt}"), "w") as handle:
        handle.write(str(first))
    for step in range(first, args.steps):
        generator = torch.Generator().manual_seed(step * 100 + rank)
        inputs = torch.randn(8, 4, generator=generator)
        loss = model(inputs).pow(2).mean()
        optimiser.zero_grad()
        loss.backward()  # the gradients' all-reduce: every rank takes part in every step
        optimiser.step()
        if rank == 0:
            state = {"model": model.module.state_dict(), "optimiser": optimiser.state_dict()}
            torch.save({**state, "step": step}, path + ".tmp")
            os.replace(path + ".tmp", path)
        dist.barrier()  # the checkpoint of this step is in place on every rank's return
        with open(os.path.join(args.out, f"step-{rank}"), "w") as handle:
            handle.write(str(step))
        print(f"rank {rank} attempt {attempt} step {step}", flush=True)
        time.sleep(args.step_seconds)
    checksum = sum(float(p.detach().sum()) for p in model.parameters())
    with open(os.path.join(args.out, f"done-{rank}"), "w") as handle:
        handle.write(f"{checksum:.6f}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
