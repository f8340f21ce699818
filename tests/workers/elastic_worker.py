"""A rank that records its torchrun-contract environment and fails as told (standard library).

    elastic_worker.py OUT_DIR [--fail-rank R] [--record-attempt N]

Each rank writes its environment to OUT_DIR/env-<rank>-<attempt>.json (the attempt is
MALAUNCH_RESTART_COUNT). Rank R (``--fail-rank``) then fails: with exit code 10 + the attempt,
and in attempt ``--record-attempt`` it first writes to TORCHELASTIC_ERROR_FILE what torch's
``@record`` would (the same JSON layout), as a script decorated with it does when it raises.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--fail-rank", type=int)
    parser.add_argument("--record-attempt", type=int)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    attempt = int(os.environ["MALAUNCH_RESTART_COUNT"])
    with open(os.path.join(args.out, f"env-{rank}-{attempt}.json"), "w") as handle:
        json.dump(dict(os.environ), handle)
    if rank != args.fail_rank:
        time.sleep(30)  # the failing rank's launcher stops this one
        return 0
    if attempt == args.record_attempt:
        stack = (
            "Traceback (most recent call last):\n"
            '  File "elastic_worker.py", line 40, in main\n'
            '    raise RuntimeError("shard 7 is corrupt")\n'
            "RuntimeError: shard 7 is corrupt\n"
        )
        message = {
            "message": "RuntimeError: shard 7 is corrupt",
            "extraInfo": {"py_callstack": stack, "timestamp": str(int(time.time()))},
        }
        with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as handle:
            json.dump({"message": message}, handle)
    print(f"rank {rank} fails in attempt {attempt}", flush=True)
    return 10 + attempt


if __name__ == "__main__":
    sys.exit(main())
