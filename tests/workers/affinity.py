"""A tiny worker for CPU binding tests: reports the CPUs the kernel lets it run on.

    python -S affinity.py DIR

writes ``DIR/<role>-<rank>.json`` with ``role``, ``rank``, ``local_rank`` (from the
environment the launcher gave it), ``cpus`` (``os.sched_getaffinity(0)`` of its main thread,
sorted) and ``thread_cpus`` (the same seen from a thread it starts, which inherits them).
Started with ``python -S``: nothing but the standard library is needed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Dict, List


def main(folder: str) -> int:
    seen: Dict[str, List[int]] = {}

    def look() -> None:
        seen["thread"] = sorted(os.sched_getaffinity(0))

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    context = json.loads(os.environ.get("MALAUNCH_CONTEXT", "{}"))
    report = {
        "role": context.get("role"),
        "rank": context.get("rank"),
        "local_rank": context.get("local_rank"),
        "cpus": sorted(os.sched_getaffinity(0)),
        "thread_cpus": seen["thread"],
    }
    name = f"{report['role']}-{report['rank']}.json"
    temporary = os.path.join(folder, f".{name}.{os.getpid()}")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(report, handle)
    os.replace(temporary, os.path.join(folder, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
