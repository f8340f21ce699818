"""A torch DDP rank whose entry point is decorated with torchelastic's ``@record``, as
torchrun's documentation asks, and that raises on one rank.

    torch_record_fail.py FAILING_RANK

Every rank joins the gloo process group and all-reduces once; FAILING_RANK then raises
ValueError in ``check_batch`` while the others wait at a barrier it never reaches (the
launchers stop them). ``@record`` writes the exception to TORCHELASTIC_ERROR_FILE.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def check_batch(rank: int, batch: int) -> None:
    raise ValueError(f"rank {rank} found a NaN in batch {batch}")


@record
def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    total = torch.ones(1)
    dist.all_reduce(total)
    print(f"rank {rank}: {int(total.item())} ranks joined", flush=True)
    if rank == int(sys.argv[1]):
        check_batch(rank, 17)
    dist.barrier()


if __name__ == "__main__":
    main()
