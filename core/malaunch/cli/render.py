"""``malaunch render``: the Kubernetes manifests of a job whose containers start malaunch.

``malaunch render volcano|pytorchjob|ascendjob|tfjob --nodes N [--nproc-per-node M]
--framework F --image IMAGE [launcher options] -- COMMAND`` prints YAML for ``kubectl apply -f
-``. Like ``simulate``, the command takes every option of the launch command: the ones given on
the command line are written into the containers' ``malaunch`` command (``--framework`` and
``--nproc-per-node`` always, whatever their source); the manifests themselves are built by
:mod:`malaunch.render`.
"""

from __future__ import annotations

import copy
from typing import Any, List, Mapping, Sequence

import click

from malaunch.cli.envvars import show_variables
from malaunch.cli.launch import build_launch_command
from malaunch.cli.simulate import launcher_tokens, option_tokens
from malaunch.errors import UsageError
from malaunch.numbers import MAX_NODES
from malaunch.params import Choice, Integer, port
from malaunch.plugins import load_plugins
from malaunch.render.manifests import render, to_yaml
from malaunch.render.request import TARGETS, RenderRequest

HELP = """Print the Kubernetes manifests of a job whose containers start malaunch.

TARGET is volcano (Volcano Job), pytorchjob (Kubeflow PyTorchJob), ascendjob (MindX AscendJob)
or tfjob (Kubeflow TFJob). Each pod's container runs `malaunch <options> -- COMMAND` with the
launcher options given here (--framework, --nproc-per-node, --grace-period, ...). Volcano's
policies restart the job on exit 69 and stop it on 64, 65, 66 and 78. Pipe the output to
`kubectl apply -f -`.
"""
# Launch options the render command writes into the containers even when they came from a
# MALAUNCH_* variable of the shell rendering them: the pods never see that shell.
ALWAYS_WRITTEN = ("framework", "nproc_per_node")
# Launch options that mean something else in a rendered job: their help says what to use
# instead, and a value given on the command line is refused rather than written into pods.
NOT_FOR_PODS = {
    "num_workers": (
        "--num-workers runs a whole TensorFlow cluster in one container; a job's worker pods "
        "are --nodes (its ps pods --num-ps)"
    ),
}


def render_options() -> List[click.Parameter]:
    """The options of ``render`` itself (the launch command's options come on top)."""
    return [
        click.Option(
            ["--nodes"], type=Integer(1, MAX_NODES),
            help="Pods that run training processes (tensorflow_ps: worker tasks).  [required]",
        ),
        click.Option(["--image"], help="Container image with malaunch installed.  [required]"),
        click.Option(["--name"], help="Job name [default: malaunch-<framework>]."),
        click.Option(["--namespace"], help="Kubernetes namespace [default: kubectl's]."),
        click.Option(
            ["--num-ps"], type=Integer(1, 1024), default=1, show_default=True,
            help="[tensorflow_ps] parameter-server tasks.",
        ),
        click.Option(
            ["--accelerator"], metavar="RESOURCE",
            help="Extended resource each training pod requests --nproc-per-node of "
            "(nvidia.com/gpu) [default: none; ascendjob: huawei.com/Ascend910].",
        ),
        click.Option(["--queue"], help="Volcano queue [default: the cluster's default queue]."),
        click.Option(
            ["--platform-restarts"], type=Integer(0, 1000), default=2, show_default=True,
            help="[volcano] times Volcano may restart the whole job (on exit 69 or an evicted "
            "pod); maxRetry is this + 1.",
        ),
        click.Option(
            ["--rendezvous-port"], type=port(),
            help="Port of the platform's rendezvous variables [default: Volcano's and "
            "Kubeflow's 23456, MindX 2222, TensorFlow 2222].",
        ),
    ]  # fmt: skip


def _written(
    ctx: click.Context, forwarded: Sequence[click.Option], values: Mapping[str, Any]
) -> List[str]:
    """The launcher options for the containers: those given on the command line, and the
    :data:`ALWAYS_WRITTEN` ones from wherever they came."""
    tokens = launcher_tokens(ctx, forwarded, values)
    for option in forwarded:
        given = (
            ctx.get_parameter_source(option.name or "") is click.core.ParameterSource.COMMANDLINE
        )
        if option.name in ALWAYS_WRITTEN and values[option.name] is not None and not given:
            tokens += option_tokens(option, values[option.name])
    return tokens


def build_command(environ: Mapping[str, str]) -> click.Command:
    """``render`` with its own options plus every option of the launch command."""
    launch = build_launch_command(load_plugins(environ))
    own = render_options()
    taken = {opt for param in own for opt in param.opts}
    # tensorflow_ps's --num-ps plans a one-machine cluster; here --num-ps shapes the job.
    forwarded = [
        _for_render(p)
        for p in launch.params
        if isinstance(p, click.Option) and not taken.intersection(p.opts)
    ]
    arguments = [p for p in launch.params if isinstance(p, click.Argument)]
    target = click.Argument(["target"], type=Choice(TARGETS), metavar="TARGET")

    def callback(**values: Any) -> int:
        ctx = click.get_current_context()
        for name, why in NOT_FOR_PODS.items():
            if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
                raise UsageError(f"render: {why}")
        request = make_request(values, _written(ctx, forwarded, values))
        click.echo(to_yaml(render(request)), nl=False)
        return 0

    command = click.Command(
        "render",
        params=[target, *own, *forwarded, *arguments],
        callback=callback,
        help=HELP,
        context_settings={
            "help_option_names": ["-h", "--help"],
            "auto_envvar_prefix": "MALAUNCH",
            "show_default": True,
        },
    )
    return show_variables(command)


def _for_render(option: click.Option) -> click.Option:
    """``option`` as render shows it: a copy with render's own help where it differs."""
    why = NOT_FOR_PODS.get(option.name or "")
    if why is None:
        return option
    shown = copy.copy(option)
    shown.help = f"Not for render: {why}."
    return shown


def make_request(values: Mapping[str, Any], tokens: List[str]) -> RenderRequest:
    """The render request of the parsed options; ``tokens`` start each container's malaunch."""
    required = {
        "framework": "--framework (or MALAUNCH_FRAMEWORK): the framework plugin to launch with",
        "nodes": "--nodes: how many pods run training processes",
        "image": "--image: the container image that has malaunch installed",
    }
    for name, what in required.items():
        if values.get(name) is None or values[name] == "":
            msg = f"render: missing {what}"
            raise UsageError(msg)
    return RenderRequest(
        target=values["target"],
        framework=values["framework"],
        nodes=values["nodes"],
        image=values["image"],
        command=tuple(values["command"]),
        launcher_args=tuple(tokens),
        nproc_per_node=values["nproc_per_node"],
        num_ps=values["num_ps"],
        name=values["name"],
        namespace=values["namespace"],
        queue=values["queue"],
        accelerator=values["accelerator"],
        grace_period=values["grace_period"],
        platform_restarts=values["platform_restarts"],
        master_port=values["rendezvous_port"],
        job_port=values.get("job_port"),
        job_channel=values.get("job_channel", True),
    )


def main(args: Sequence[str], environ: Mapping[str, str]) -> int:
    """Parse ``malaunch render ARGS`` and print the manifests; returns the exit code."""
    command = build_command(environ)
    result = command.main(list(args), prog_name="malaunch render", standalone_mode=False)
    return int(result) if isinstance(result, int) else 0
