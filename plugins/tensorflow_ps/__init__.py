"""The built-in `tensorflow_ps` framework plugin (hook implementations only)."""

from __future__ import annotations

from typing import List

from malaunch.api import Framework, hookimpl
from malaunch_tensorflow_ps import options, plan


@hookimpl
def malaunch_register_frameworks() -> List[Framework]:
    """TensorFlow parameter-server training: TF1 flags and TF_CONFIG for this task."""
    return [
        Framework(
            name=plan.FRAMEWORK,
            plan=plan.plan,
            options=options.cli_options(),
            help="TensorFlow parameter server: this task with --ps_hosts ... flags and "
            "TF_CONFIG, or a whole local cluster (--num-ps/--num-workers)",
            # TensorFlow has no launcher of its own: TF_CONFIG is what platforms give a pod.
            env_prefixes=("TF_",),
        )
    ]
