"""A small real TensorFlow parameter-server job, TF1 style (``tf.compat.v1``), on CPU.

Takes the flags malaunch's ``tensorflow_ps`` plugin appends: ``--ps_hosts``, ``--worker_hosts``,
``--job_name``, ``--task_index``.

- ps tasks serve the variables (``server.join()``) until the launcher stops them.
- each worker runs ``--steps`` SGD steps of a linear model whose variables live on the ps
  (``replica_device_setter``); every step also bumps ``global_step`` on the ps;
- at the end each worker bumps a ``finished`` counter on the ps, waits until every worker has
  done so, and checks that ``global_step`` == workers x steps: every worker's updates were
  applied to the same variables. It prints one result line and exits 1 otherwise.

``device_filters`` limit each worker's session to the ps and itself, so a worker that finishes
first does not block the others.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # keep TensorFlow's C++ INFO lines out

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ps_hosts", required=True)
    parser.add_argument("--worker_hosts", required=True)
    parser.add_argument("--job_name", required=True, choices=["ps", "worker"])
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=120.0, help="wait for peers, s")
    return parser.parse_args()


def hosts(value: str) -> list[str]:
    return [h.strip() for h in value.split(",") if h.strip()]


def build_graph(cluster: tf.train.ClusterSpec, index: int) -> dict[str, tf.Tensor]:
    """Variables on the ps (round-robin), computation on this worker."""
    setter = v1.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:worker/task:{index}"
    )
    with v1.device(setter):
        global_step = v1.train.get_or_create_global_step()
        finished = v1.get_variable("finished", [], tf.int64, v1.zeros_initializer())
        weights = v1.get_variable("w", [4, 1], tf.float32, v1.zeros_initializer())
        bias = v1.get_variable("b", [1], tf.float32, v1.zeros_initializer())
        inputs = v1.placeholder(tf.float32, [None, 4])
        target = v1.placeholder(tf.float32, [None, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(inputs, weights) + bias - target))
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        mark_finished = v1.assign_add(finished, 1)
    return {
        "global_step": global_step,
        "finished": finished,
        "loss": loss,
        "train": train,
        "mark_finished": mark_finished,
        "inputs": inputs,
        "target": target,
    }


def wait_until(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def run_worker(args: argparse.Namespace, cluster: tf.train.ClusterSpec, server) -> int:  # type: ignore[no-untyped-def]
    nworkers = cluster.num_tasks("worker")
    tag = f"worker {args.task_index}/{nworkers}"
    graph = tf.Graph()
    with graph.as_default():
        ops = build_graph(cluster, args.task_index)
        init = v1.global_variables_initializer()
        uninitialized = v1.report_uninitialized_variables()
    config = v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{args.task_index}"])
    with v1.Session(server.target, graph=graph, config=config) as sess:
        if args.task_index == 0:
            sess.run(init)  # the chief initialises; the others wait for it
        wait_until(lambda: len(sess.run(uninitialized)) == 0, args.timeout, "initialised ps")
        rng = np.random.default_rng(args.task_index)
        true_w = np.array([[1.0], [-2.0], [0.5], [3.0]], dtype=np.float32)
        for step in range(args.steps):
            x = rng.standard_normal((32, 4)).astype(np.float32)
            feed = {ops["inputs"]: x, ops["target"]: x @ true_w + 0.25}
            _, loss = sess.run([ops["train"], ops["loss"]], feed)
            if step % 5 == 0 or step == args.steps - 1:
                print(f"{tag}: step {step} loss={loss:.4f}", flush=True)
        sess.run(ops["mark_finished"])
        wait_until(lambda: sess.run(ops["finished"]) >= nworkers, args.timeout, "all workers")
        total = int(sess.run(ops["global_step"]))
    expected = nworkers * args.steps
    verdict = "ok" if total == expected else f"MISMATCH (expected {expected})"
    print(f"{tag}: global_step on ps={total} {verdict}", flush=True)
    return 0 if total == expected else 1


def main() -> int:
    args = parse_args()
    v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec({"ps": hosts(args.ps_hosts), "worker": hosts(args.worker_hosts)})
    if args.job_name == "ps":
        server = tf.distribute.Server(cluster, job_name="ps", task_index=args.task_index)
        print(f"ps {args.task_index}: serving at {server.target}", flush=True)
        server.join()  # runs until the launcher stops it
        return 0
    config = v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{args.task_index}"])
    server = tf.distribute.Server(
        cluster, job_name="worker", task_index=args.task_index, config=config
    )
    return run_worker(args, cluster, server)


if __name__ == "__main__":
    sys.exit(main())
