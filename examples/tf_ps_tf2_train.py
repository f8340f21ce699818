"""A small real TensorFlow 2 parameter-server job (``ParameterServerStrategy``) from ``TF_CONFIG``.

TF2's parameter-server training needs a *coordinator* (TensorFlow calls it ``chief``) that
creates the variables and schedules steps on the workers. malaunch's PS topologies (the
``TF_PS_HOSTS``/``TF_WORKER_HOSTS`` platform variables) have only ``ps`` and ``worker`` tasks, so
this example lets **worker 0 be the coordinator**: every task rewrites the same ``TF_CONFIG``
cluster to ``{"chief": [worker 0], "worker": [worker 1..], "ps": [...]}``. It therefore needs at
least two workers. (When ``TF_CONFIG`` already has a ``chief`` task, it is used unchanged.)

- ps tasks serve the variables until the launcher stops them (they are service processes);
- workers 1.. serve until the coordinator tells them it is done: it writes a marker file *on
  the worker* (a remote ``tf.io.write_file`` placed on that worker's device), which the
  worker process waits for, then exits 0;
- the coordinator schedules ``--steps`` SGD steps on the workers; every step also bumps a
  counter variable on the ps. At the end it checks the counter == steps and that the loss went
  down, prints one result line, and exits 1 otherwise.

The ``--ps_hosts/--worker_hosts/--job_name/--task_index`` flags the ``tensorflow_ps`` plugin
appends are accepted and ignored: this script reads ``TF_CONFIG``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # keep TensorFlow's C++ INFO lines out

import tensorflow as tf


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    for flag in ("--ps_hosts", "--worker_hosts", "--job_name", "--task_index"):
        parser.add_argument(flag, help="ignored: TF_CONFIG is read instead")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=120.0, help="worker waits this long, s")
    parser.add_argument("--done-dir", default=tempfile.gettempdir())
    return parser.parse_args()


def read_tf_config() -> Tuple[Dict[str, List[str]], str, int]:
    """The cluster with a chief, and this task, from ``TF_CONFIG``."""
    config = json.loads(os.environ["TF_CONFIG"])
    cluster = {role: list(addrs) for role, addrs in config["cluster"].items()}
    role, index = config["task"]["type"], int(config["task"]["index"])
    if "chief" in cluster:
        return cluster, role, index
    workers = cluster.get("worker", [])
    if len(workers) < 2:
        sys.exit("tf_ps_tf2_train: needs a chief or at least 2 workers (worker 0 coordinates)")
    cluster["chief"], cluster["worker"] = workers[:1], workers[1:]
    if role == "worker":
        role, index = ("chief", 0) if index == 0 else ("worker", index - 1)
    return cluster, role, index


def marker(done_dir: str, address: str) -> Path:
    return Path(done_dir, f"tf2ps-done-{address.replace(':', '_')}")


def serve(cluster: Dict[str, List[str]], role: str, index: int, args: argparse.Namespace) -> int:
    """ps: serve until stopped. worker: serve until the coordinator's marker appears."""
    config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=4)
    spec = tf.train.ClusterSpec(cluster)
    server = tf.distribute.Server(
        spec, job_name=role, task_index=index, config=config, protocol="grpc"
    )
    # Worker k of TF_CONFIG is TensorFlow's worker k-1 here (worker 0 coordinates).
    print(f"{role} {index}: serving at {server.target}", flush=True)
    if role == "ps":
        server.join()
        return 0
    done = marker(args.done_dir, cluster[role][index])
    deadline = time.monotonic() + args.timeout
    while not done.exists():
        if time.monotonic() > deadline:
            print(f"{role} {index}: no word from the coordinator in {args.timeout:.0f} s")
            return 1
        time.sleep(0.1)
    done.unlink()
    print(f"{role} {index}: coordinator finished; exiting", flush=True)
    return 0


def coordinate(cluster: Dict[str, List[str]], args: argparse.Namespace) -> int:
    """Create variables on the ps, schedule steps on the workers, check the result."""
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc"
    )
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        weights = tf.Variable(tf.zeros([4, 1]), name="w")
        counter = tf.Variable(0, dtype=tf.int64, name="steps_applied")
    true_w = tf.constant([[1.0], [-2.0], [0.5], [3.0]])

    @tf.function
    def step() -> Any:
        def replica_fn() -> Any:
            x = tf.random.normal([32, 4])
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) - tf.matmul(x, true_w)))
            weights.assign_sub(0.1 * tape.gradient(loss, weights))
            counter.assign_add(1)
            return loss

        return strategy.run(replica_fn)

    losses = [coordinator.schedule(step) for _ in range(args.steps)]
    coordinator.join()
    first, last = float(losses[0].fetch()), float(losses[-1].fetch())
    applied = int(counter.read_value())
    devices = [str(v.device) for v in (weights, counter)]
    for index, address in enumerate(cluster["worker"]):
        with tf.device(f"/job:worker/replica:0/task:{index}"):
            tf.io.write_file(str(marker(args.done_dir, address)), "done")
    ok = applied == args.steps and last < first
    verdict = "ok" if ok else f"MISMATCH (expected {args.steps} steps and a falling loss)"
    print(f"coordinator: variables on {sorted(set(devices))}", flush=True)
    print(
        f"coordinator: steps applied on ps={applied} loss {first:.4f} -> {last:.4f} {verdict}",
        flush=True,
    )
    return 0 if ok else 1


def main() -> int:
    args = parse_args()
    cluster, role, index = read_tf_config()
    if role == "chief":
        return coordinate(cluster, args)
    return serve(cluster, role, index, args)


if __name__ == "__main__":
    sys.exit(main())
