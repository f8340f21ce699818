"""A real torch gloo job in which rank 1 stops making progress inside a named function.

Every rank prints, beats and all-reduces once per step; at step 5 rank 1 enters
``stall_in_data_loading`` and never comes back, so the other ranks wait for it inside
``all_reduce``: the hang ``--hang-timeout`` must find, with rank 1 as the odd one out.
Writes its pid to OUT_DIR/worker-<rank>.pid.
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

from malaunch import context


def stall_in_data_loading() -> None:
    while True:  # a stuck read, as far as anyone outside can tell
        time.sleep(0.05)


def main() -> None:
    out = sys.argv[1]
    with open(os.path.join(out, f"worker-{context.rank}.pid"), "w") as handle:
        handle.write(str(os.getpid()))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    tensor = torch.ones(4)
    for step in range(10_000):
        if rank == 1 and step == 5:
            stall_in_data_loading()
        # The others still print step 5 before they block in its all_reduce, so rank 1 is
        # the one silent the longest, by this sleep.
        print(f"rank {rank} step {step}", flush=True)
        context.heartbeat()
        time.sleep(0.3)
        dist.all_reduce(tensor)


if __name__ == "__main__":
    main()
