"""A torch DDP rank whose entry point is decorated with torchelastic's ``@record``, as
torchrun's documentation asks, and that raises on one rank.

    torch_record_fail.py FAILING_RANK

Every rank joins the gloo process group and all-reduces once; FAILING_RANK then raises
ValueError in ``check_batch`` while the others wait at a barrier it never reaches (the
launchers stop them). ``@record`` writes the exception to TORCHELASTIC_ERROR_FILE and logs
its traceback; the rank then exits 1 at once, as Python would for the exception.
"""

from __future__ import annotations

import os
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
    try:
        main()
    except ValueError:
        # Exit 1 without the interpreter's teardown: with the gloo group still up, torch's
        # C++ destructors at exit sometimes abort ("terminate called without an active
        # exception", SIGABRT), and the test means a rank that exits 1.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
