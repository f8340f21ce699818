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
from typing import Any, List, Mapping, Sequence, Tuple

import click

from malaunch.cli.command import Command, about
from malaunch.cli.launch import build_launch_command
from malaunch.cli.simulate import launcher_tokens, option_tokens
from malaunch.errors import UsageError
from malaunch.numbers import MAX_NODES
from malaunch.params import Choice, Integer, Text, port
from malaunch.plugins import load_plugins
from malaunch.render.ascend import ACCELERATOR_TYPES
from malaunch.render.manifests import render, to_yaml
from malaunch.render.request import TARGETS, RenderRequest

HELP = """Print the Kubernetes manifests of a job whose containers start malaunch.

TARGET is volcano (Volcano Job), pytorchjob (Kubeflow PyTorchJob), ascendjob (MindX AscendJob)
or tfjob (Kubeflow TFJob). Each pod's container runs `malaunch <options> -- COMMAND` with the
launcher options given here (--framework, --nproc-per-node, --grace-period, ...); the
framework must be installed here too, as its options are read from its plugin. Volcano's
policies restart the job on exit 69 and stop it on 64, 65, 66 and 78. Pipe the output to
`kubectl apply -f -`.
"""
# Launch options the render command writes into the containers even when they came from a
# MALAUNCH_* variable of the shell rendering them: the pods never see that shell.
ALWAYS_WRITTEN = ("framework", "nproc_per_node")


def render_options() -> List[click.Parameter]:
    """The options of ``render`` itself (the launch command's options come on top)."""
    return [
        click.Option(
            ["--nodes"], type=Integer(1, MAX_NODES),
            help="Pods that run training processes (tensorflow_ps: worker tasks).  [required]",
        ),
        click.Option(
            ["--image"], type=Text(), help="Container image with malaunch installed.  [required]"
        ),
        click.Option(["--name"], type=Text(), help="Job name [default: malaunch-<framework>]."),
        click.Option(
            ["--namespace"], type=Text(), help="Kubernetes namespace [default: kubectl's]."
        ),
        click.Option(
            ["--num-ps"], type=Integer(1, 1024), default=1, show_default=True,
            help="[tensorflow_ps] parameter-server tasks.",
        ),
        click.Option(
            ["--accelerator"], type=Text(), metavar="RESOURCE",
            help="Extended resource each training pod requests --nproc-per-node of "
            "(nvidia.com/gpu) [default: none; ascendjob: huawei.com/Ascend910].",
        ),
        click.Option(
            ["--queue"], type=Text(),
            help="Volcano queue [default: the cluster's default queue].",
        ),
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
        click.Option(
            ["--chief"], is_flag=True,
            help="[tensorflow_ps] a chief task (TFJob Chief replica, Volcano chief task): the "
            "job succeeds when the chief does, as TFJob's default (--success-policy).",
        ),
        click.Option(
            ["--accelerator-type"], type=Choice(ACCELERATOR_TYPES), default="ascend-910b",
            show_default=True,
            help="[ascendjob] the NPU model of the ring-controller.atlas label MindX schedules "
            "by: ascend-910 (Atlas 800), ascend-910b (Atlas A2/A3), ascend-npu (Atlas "
            "350/850/950), ascend-310P, ascend-310.",
        ),
        click.Option(
            ["--node-selector"], multiple=True, metavar="KEY=VALUE",
            help="A nodeSelector label of every pod, e.g. host-arch=huawei-arm (repeatable).",
        ),
        # simulate's option, taken here only to say why it does not apply
        click.Option(["--print-env"], is_flag=True, hidden=True),
    ]  # fmt: skip


# Options that make no sense for a rendered job, and why: the launch options given here go
# into every pod's start command.
NOT_IN_PODS = {
    "dry_run": "every pod would print its plan and exit 0",
    "print_env": "simulate's option: `malaunch simulate --print-env` prints each node's "
    "environment",
    "num_workers": "it plans a whole cluster on one machine; the manifest describes the "
    "cluster with --nodes and --num-ps",
}


def refuse_pod_options(ctx: click.Context) -> None:
    """One line naming each option given that makes no sense for a rendered job, and why."""
    given = [
        param
        for param in ctx.command.params
        if param.name in NOT_IN_PODS
        and ctx.get_parameter_source(param.name) is click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        reasons = "; ".join(f"{p.opts[0]} ({NOT_IN_PODS[p.name or '']})" for p in given)
        msg = f"render: not for a rendered job: {reasons}"
        raise UsageError(msg)


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
    plugins = load_plugins(environ)
    launch = build_launch_command(plugins)
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
        if values.get("framework"):
            # The containers would exit 78 on an unknown name; its options are read from here.
            with about("--framework"):
                plugins.framework(values["framework"])
        refuse_pod_options(ctx)
        request = make_request(values, _written(ctx, forwarded, values))
        # YAML is UTF-8 (kubectl reads nothing else), whatever this shell's locale.
        click.echo(to_yaml(render(request)).encode("utf-8"), nl=False)
        return 0

    return Command(
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


def _for_render(option: click.Option) -> click.Option:
    """``option`` as render shows it: one that makes no sense in a pod says why, in a copy
    (the launch command's help stays as it is)."""
    why = NOT_IN_PODS.get(option.name or "")
    if why is None:
        return option
    shown = copy.copy(option)
    shown.help = f"Not for a rendered job: {why}."
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
        chief=values["chief"],
        success_policy=values.get("success_policy"),
        accelerator_type=values["accelerator_type"],
        node_selector=tuple(_pairs(values["node_selector"])),
    )


def _pairs(items: Sequence[str]) -> List[Tuple[str, str]]:
    """``--node-selector KEY=VALUE`` items (checked as Kubernetes labels by the request)."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            msg = f"--node-selector {item!r}: expected KEY=VALUE"
            raise UsageError(msg)
        pairs.append((key, value))
    return pairs


def main(args: Sequence[str], environ: Mapping[str, str]) -> int:
    """Parse ``malaunch render ARGS`` and print the manifests; returns the exit code."""
    command = build_command(environ)
    result = command.main(list(args), prog_name="malaunch render", standalone_mode=False)
    return int(result) if isinstance(result, int) else 0
