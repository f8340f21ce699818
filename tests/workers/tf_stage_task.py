"""A task of the staging tests' TensorFlow parameter-server job (no chief: worker i is rank i).

A worker writes ``results/<rank>/model.txt`` (a per-rank output) and ``shared/worker-<rank>.txt``
(a shared one); a ps task writes nothing and exits 0. Started with ``python -S``.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys


def main() -> int:
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    if task["type"] != "worker":
        return 0
    rank = int(task["index"])
    mine = pathlib.Path("results") / str(rank)
    mine.mkdir(parents=True, exist_ok=True)
    (mine / "model.txt").write_text(f"model of rank {rank}\n")
    shared = pathlib.Path("shared")
    shared.mkdir(exist_ok=True)
    (shared / f"worker-{rank}.txt").write_text(f"written by rank {rank}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
