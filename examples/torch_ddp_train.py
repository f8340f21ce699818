"""A small real PyTorch DDP job on CPU (gloo): all-reduce, a few SGD steps, identical weights.

Reads the torchrun-style environment malaunch's ``torch_ddp`` plugin sets (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``). Prints one result line per
rank and exits non-zero when the ranks disagree.

Failure drill: ``--crash-rank R --crash-step S --crash-code C`` makes global rank R exit with
code C at step S. The other ranks then stall for ``--stall`` seconds at that step, the way NCCL
or HCCL ranks hang in a collective whose peer died (gloo would instead fail them at once with
its own error, which would race the crashed rank's code to the launcher): only the launcher's
fail-fast teardown ends them early. ``--pid-dir DIR`` writes ``rank<R>.pid`` so a test can
check that no process is left.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

# Importing torch takes seconds on a small machine: say so, so a first run is not a silent wait.
print(
    f"rank {os.environ.get('RANK', '?')}/{os.environ.get('WORLD_SIZE', '?')}: importing torch",
    flush=True,
)

import torch  # noqa: E402 (after the line above on purpose)
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--crash-rank", type=int, default=-1)
    parser.add_argument("--crash-step", type=int, default=1)
    parser.add_argument("--crash-code", type=int, default=3)
    parser.add_argument("--stall", type=float, default=300.0, help="other ranks' stall, s")
    parser.add_argument("--pid-dir", default="")
    parser.add_argument("--timeout", type=float, default=120.0, help="collective timeout, s")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if args.pid_dir:
        Path(args.pid_dir).mkdir(parents=True, exist_ok=True)
        Path(args.pid_dir, f"rank{rank}.pid").write_text(str(os.getpid()))
    # env:// reads MASTER_ADDR / MASTER_PORT; a timeout keeps a broken peer from hanging forever.
    dist.init_process_group(
        "gloo", rank=rank, world_size=world, timeout=timedelta(seconds=args.timeout)
    )
    tag = f"rank {rank}/{world} (local {local_rank})"

    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    expected = world * (world + 1) / 2
    if value.item() != expected:
        print(f"{tag}: allreduce={value.item()} expected {expected} MISMATCH", flush=True)
        return 1

    torch.manual_seed(1234)  # same initial weights everywhere; DDP broadcasts rank 0's anyway
    model = DistributedDataParallel(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(rank)  # each rank sees different data
    for step in range(args.steps):
        if rank == args.crash_rank and step == args.crash_step:
            print(f"{tag}: crashing at step {step} with code {args.crash_code}", flush=True)
            os._exit(args.crash_code)  # no clean shutdown, like a real crash
        if args.crash_rank >= 0 and step == args.crash_step:
            print(f"{tag}: stalled at step {step} (rank {args.crash_rank} crashed)", flush=True)
            time.sleep(args.stall)
            return 1  # nobody stopped us: the launcher failed to tear the job down
        inputs = torch.randn(16, 8, generator=generator)
        target = inputs.sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(inputs), target)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        print(f"{tag}: step {step} loss={loss.item():.4f}", flush=True)

    checksum = torch.cat([p.detach().flatten() for p in model.parameters()]).double().sum()
    gathered = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(gathered, checksum.reshape(1))
    sums = [t.item() for t in gathered]
    identical = all(s == sums[0] for s in sums)
    verdict = "identical" if identical else f"DIFFER {sums}"
    print(f"{tag}: allreduce={value.item()} ok; params checksum={checksum.item():.10f} {verdict}")
    dist.barrier()  # nobody tears down while a peer is still in a collective
    dist.destroy_process_group()
    return 0 if identical else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Gloo's C++ threads can still hold tensors with Python references when the interpreter
    # finalises, which aborts the process (SIGABRT, "terminate called without an active
    # exception") now and then under load, after the work is done. Leaving without the
    # interpreter's teardown keeps the exit code the job's own.
    os._exit(code)
