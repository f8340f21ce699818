"""Print what ``malaunch.context`` says about this process, as one JSON line.

Run it under any framework and platform; it needs no framework installed::

    malaunch --framework torch_ddp --topology local --nproc-per-node 2 -- \\
        python examples/context_demo.py
    malaunch --framework tensorflow_ps --num-ps 1 --num-workers 2 -- \\
        python examples/context_demo.py
    malaunch --framework mindspore --ms-mode dynamic --nproc-per-node 2 -- \\
        python examples/context_demo.py
    python examples/context_demo.py      # without malaunch: rank 0 of 1

Extra arguments (tensorflow_ps appends ``--ps_hosts ... --task_index N``) are ignored.
"""

from __future__ import annotations

import json
import os
import sys
import time

from malaunch import context

SERVE_SECONDS = 600.0  # upper bound for a service; malaunch normally stops it much sooner


def main() -> int:
    ctx = context.current()
    # One write per line: processes sharing a stdout (torchrun's workers) cannot split it.
    sys.stdout.write(json.dumps({**ctx.as_dict(), "pid": os.getpid()}, sort_keys=True) + "\n")
    if ctx.rank is None:
        # A service process: a TensorFlow ps, or the MindSpore scheduler (which runs this same
        # command; a real script calls mindspore.communication.init() there). Services serve
        # until the workers are done, and malaunch counts one that ends early as a failure;
        # so wait, as a ps's server.join() would, until malaunch stops it with SIGTERM.
        time.sleep(SERVE_SECONDS)
        return 0
    if ctx.is_main:
        datasets = ", ".join(f"{name} -> {path}" for name, path in ctx.datasets.items())
        sys.stdout.write(f"main process of {ctx.world_size}; datasets: {datasets or 'none'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
