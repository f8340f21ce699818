"""A small real MindSpore dynamic-cluster job on CPU: ``AllReduce`` of ``rank + 1`` on every rank.

Started the way ``msrun`` (and malaunch's ``mindspore`` plugin without a rank table) starts it:
one scheduler process (``MS_ROLE=MS_SCHED``) and one process per worker (``MS_ROLE=MS_WORKER``),
all with the same ``MS_SCHED_HOST``, ``MS_SCHED_PORT`` and ``MS_WORKER_NUM``. The scheduler runs
this same script: ``init()`` serves the cluster there until the workers have finished, then
MindSpore 2.10 ends the scheduler process itself (with code 0) inside ``init()``.

Each worker prints ``rank R/N: allreduce=S expected S ok`` and exits 1 when the sum is wrong.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("GLOG_v", "2")  # MindSpore's C++ log: warnings and errors only

import numpy as np
from mindspore.communication import get_group_size, get_rank, init

import mindspore as ms
from mindspore import nn, ops


class SumAcrossRanks(nn.Cell):
    """One ``AllReduce(SUM)`` over the world group."""

    def __init__(self) -> None:
        super().__init__()
        self.all_reduce = ops.AllReduce(ops.ReduceOp.SUM)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.all_reduce(x)


def main() -> int:
    role = os.environ.get("MS_ROLE", "MS_WORKER")
    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    init()  # the scheduler serves the cluster inside init() and normally exits there
    if role == "MS_SCHED":
        return 0
    rank, size = get_rank(), get_group_size()
    value = SumAcrossRanks()(ms.Tensor(np.array([rank + 1.0], np.float32)))
    got = float(value.asnumpy()[0])
    expected = size * (size + 1) / 2
    verdict = "ok" if got == expected else "MISMATCH"
    node_id = os.environ.get("MS_NODE_ID", "-")
    print(
        f"rank {rank}/{size} (MS_NODE_ID {node_id}): allreduce={got} expected {expected} {verdict}"
    )
    return 0 if got == expected else 1


if __name__ == "__main__":
    sys.exit(main())
