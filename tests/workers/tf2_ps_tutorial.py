"""TF2 parameter-server training shaped like TensorFlow's tutorial ("Parameter server training
with ParameterServerStrategy"), for a cluster with a chief, read from ``TF_CONFIG``:

- workers and parameter servers start a ``tf.distribute.Server`` and ``join()`` it: they never
  end by themselves;
- the chief is the coordinator: it creates the variables on the ps through
  ``ParameterServerStrategy``, schedules steps on the workers with a ``ClusterCoordinator``,
  waits for them, prints one line and exits 0.

Nothing here knows about malaunch (extra command-line flags are ignored); only the launcher's
success policy can end such a job.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")  # as the tutorial recommends

import tensorflow as tf  # type: ignore[import-untyped]  # TensorFlow ships no type information

STEPS = 10


def main() -> int:
    cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if cluster_resolver.task_type in ("worker", "ps"):
        server = tf.distribute.Server(
            cluster_resolver.cluster_spec(),
            job_name=cluster_resolver.task_type,
            task_index=cluster_resolver.task_id,
            protocol=cluster_resolver.rpc_layer or "grpc",
            start=True,
        )
        print(f"{cluster_resolver.task_type} {cluster_resolver.task_id}: serving", flush=True)
        server.join()
        return 0  # never reached
    strategy = tf.distribute.ParameterServerStrategy(cluster_resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        weights = tf.Variable(tf.zeros([4, 1]), name="weights")
        steps = tf.Variable(0, dtype=tf.int64, name="steps")
    target = tf.constant([[1.0], [-2.0], [0.5], [3.0]])

    @tf.function  # type: ignore[untyped-decorator]
    def train_step() -> tf.Tensor:
        def replica_fn() -> tf.Tensor:
            x = tf.random.normal([16, 4])
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) - tf.matmul(x, target)))
            weights.assign_sub(0.1 * tape.gradient(loss, weights))
            steps.assign_add(1)
            return loss

        return strategy.run(replica_fn)

    for _ in range(STEPS):
        coordinator.schedule(train_step)
    coordinator.join()
    print(f"chief: {int(steps.read_value())} steps applied on the ps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
