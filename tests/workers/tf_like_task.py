"""A parameter-server task shaped like TF2's (standard library only), for the success-policy
tests: the chief works and exits 0, workers serve ``--worker-seconds`` (forever by default, as
``server.join()`` does) and ps tasks serve forever.

    tf_like_task.py OUT_DIR [--chief-seconds S] [--worker-seconds S] [TF flags...]

Each task writes its pid to OUT_DIR/<role>-<index>.pid, the cluster its TF_CONFIG names to
OUT_DIR/<role>-<index>-<attempt>.cluster.json (the attempt: MALAUNCH_RESTART_COUNT) and, when it
ends by itself, OUT_DIR/<role>-<index>.done. The role and index come from TF_CONFIG, as TF2
reads them.
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
    parser.add_argument("--chief-seconds", type=float, default=0.5)
    parser.add_argument("--worker-seconds", type=float)
    args, _ = parser.parse_known_args()  # the tensorflow_ps plugin's TF1 flags are ignored
    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    name = f"{task['type']}-{task['index']}"
    attempt = os.environ.get("MALAUNCH_RESTART_COUNT", "0")
    seen = os.path.join(args.out, f"{name}-{attempt}.cluster.json")
    with open(seen + ".tmp", "w") as handle:
        json.dump(config["cluster"], handle)
    os.replace(seen + ".tmp", seen)  # whole, for a test that polls for it
    with open(os.path.join(args.out, f"{name}.pid"), "w") as handle:
        handle.write(str(os.getpid()))
    print(f"{name} serving", flush=True)
    if task["type"] == "chief":
        seconds = args.chief_seconds
    elif task["type"] == "worker" and args.worker_seconds is not None:
        seconds = args.worker_seconds
    else:
        while True:  # server.join(): only a signal ends it
            time.sleep(1)
    time.sleep(seconds)
    with open(os.path.join(args.out, f"{name}.done"), "w") as handle:
        handle.write(str(time.time()))
    print(f"{name} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
