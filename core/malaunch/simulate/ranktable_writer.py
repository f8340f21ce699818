"""``python -m malaunch.simulate.ranktable_writer``: the platform side of a simulated rank table.

``malaunch simulate --platform modelarts`` writes ``{"status": "initializing"}`` into every
node's ``jobstart_hccl.json`` before the node launchers start, then runs this as a service
process: after half the delay it writes a partial table (still ``initializing``, one instance),
after the full delay the completed one, each replace atomic as a kubelet ConfigMap update is.
Then it waits until the simulation stops it (a service that ended early would count as a
failure). ``--never`` leaves the tables initializing, for the "never ready" drill.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from malaunch.files import write_atomic
from malaunch.simulate.platforms import partial_table
from malaunch.wording import plural


def write_json(path: Path, document: Dict[str, Any]) -> None:
    """Replace ``path`` atomically: a reader sees the old or the new table, never half."""
    write_atomic(path, json.dumps(document, indent=2) + "\n")


def write_all(paths: Sequence[Path], document: Dict[str, Any]) -> None:
    for path in paths:
        write_json(path, document)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m malaunch.simulate.ranktable_writer")
    parser.add_argument("--table", required=True, type=Path, help="the completed table (JSON)")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds until completed")
    parser.add_argument("--never", action="store_true", help="never complete the table")
    parser.add_argument("targets", nargs="+", type=Path, help="each node's jobstart_hccl.json")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Complete the tables on schedule, then wait to be stopped."""
    args = parse_args(argv)
    table: Dict[str, Any] = json.loads(args.table.read_text(encoding="utf-8"))
    targets: List[Path] = list(args.targets)
    if args.never:
        print("rank table stays initializing (--ranktable-never-ready)", flush=True)
    else:
        time.sleep(args.delay / 2)
        write_all(targets, partial_table(table))
        print("rank table: partial, still initializing", flush=True)
        time.sleep(args.delay / 2)
        write_all(targets, table)
        print(
            f"rank table completed after {args.delay:g}s ({plural(len(targets), 'node')})",
            flush=True,
        )
    while True:  # SIGTERM from the simulation ends the process (default action)
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
