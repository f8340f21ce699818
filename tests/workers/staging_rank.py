"""A rank of the staging tests: checks the files staged into ``data`` against the hashes in
``EXPECTED`` (JSON), writes ``out/rank<RANK>/checkpoint.bin``, then does what its options say.

--exit N          end with exit code N once the checkpoint is written
--wait FILE       after the checkpoint, wait (at most 120 s) until FILE exists
--data DIR        where the inputs are (default: data)
--out DIR         where the outputs go (default: out)
Started with ``python -S``: nothing but the standard library is needed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import sys
import time


def tree(root: pathlib.Path) -> dict[str, str]:
    # The engine's manifest and lock files are its own, not the dataset's.
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".malaunch-" not in path.name
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--wait")
    parser.add_argument("--data", default="data")
    parser.add_argument("--out", default="out")
    args = parser.parse_args()
    rank = os.environ["RANK"]
    seen = tree(pathlib.Path(args.data))
    if seen != json.loads(os.environ["EXPECTED"]):
        print(f"rank {rank}: the staged inputs differ: {sorted(seen)}", flush=True)
        return 2
    print(f"rank {rank}: {len(seen)} inputs as expected", flush=True)
    out = pathlib.Path(args.out) / f"rank{rank}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "checkpoint.bin").write_bytes(bytes([int(rank)]) * 1000)
    if args.wait:
        deadline = time.monotonic() + 120
        while not os.path.exists(args.wait) and time.monotonic() < deadline:
            time.sleep(0.05)
    return int(args.exit)


if __name__ == "__main__":
    sys.exit(main())
