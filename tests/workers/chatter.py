"""A rank that prints numbered lines for a while, then exits 0 (console stall tests).

    chatter.py SECONDS [LINES_PER_SECOND]

Prints ``rank R line I`` and some padding, in batches every 20 ms, for SECONDS, then
``rank R done after N lines`` (N: the lines before it). Standard library only.
"""

from __future__ import annotations

import os
import sys
import time

PAD = "." * 80


def main() -> int:
    seconds = float(sys.argv[1])
    rate = float(sys.argv[2]) if len(sys.argv) > 2 else 500.0
    rank = os.environ.get("RANK", "0")
    start = time.monotonic()
    count = 0
    while time.monotonic() - start < seconds:
        due = int((time.monotonic() - start) * rate) + 1
        sys.stdout.write("".join(f"rank {rank} line {i} {PAD}\n" for i in range(count, due)))
        sys.stdout.flush()
        count = max(count, due)
        time.sleep(0.02)
    print(f"rank {rank} done after {count} lines", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
