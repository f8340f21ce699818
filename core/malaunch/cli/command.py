"""The click classes every malaunch command is built from, and the rule they add: a value
checked after click parsed it is blamed on the ``MALAUNCH_`` variable it came from, as click's
own refusals are (:func:`malaunch.cli.main.click_message`)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional, Tuple

import click

from malaunch.cli.options import ENV_PREFIX
from malaunch.errors import MalaunchError, UsageError
from malaunch.wording import did_you_mean


def envvar_name(param: click.Parameter, ctx: Optional[click.Context]) -> str:
    """The variable click reads for ``param``: a tool command's are
    ``MALAUNCH_<COMMAND>_<OPTION>`` (click adds the command's name to ``auto_envvar_prefix``)."""
    if isinstance(param.envvar, str):
        return param.envvar
    if param.envvar:
        return str(param.envvar[0])
    prefix = ctx.auto_envvar_prefix if ctx is not None else None
    return f"{prefix or ENV_PREFIX}_{(param.name or '').upper()}"


def from_variable(message: str, ctx: click.Context) -> Optional[str]:
    """``message`` naming the variable instead of the option, when it names first (or ``(from
    --x)``) an option whose value came from its ``MALAUNCH_`` variable; None otherwise."""
    for param in ctx.command.params:
        name = param.name or ""
        if not isinstance(param, click.Option) or not name:
            continue
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.ENVIRONMENT:
            continue
        variable = envvar_name(param, ctx)
        for flag in param.opts:
            if message.startswith((f"{flag} ", f"{flag}:")):
                return variable + message[len(flag) :]
            if f"(from {flag})" in message:
                return message.replace(f"(from {flag})", f"(from {variable})", 1)
    return None


class Context(click.Context):
    """click's context, plus one rule for the launcher's own errors: a value checked after
    click parsed it (a plugin name, a file's content, a render field) is blamed on the
    ``MALAUNCH_`` variable it came from, as click's own errors are (see
    :func:`malaunch.cli.main.click_message`). Messages name their option first; this turns
    that name into the variable's where the value came from one."""

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().invoke(*args, **kwargs)
        except MalaunchError as exc:
            renamed = from_variable(str(exc), self)
            if renamed is not None:
                exc.args = (renamed,)
            raise


class Command(click.Command):
    """A command whose context is :class:`Context`, and whose ``--help`` shows each option's
    variable (click's ``show_envvar``)."""

    context_class = Context

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        show_variables(self)


class Group(click.Group):
    """A group whose context, and its commands' (``@group.command``), are :class:`Context`;
    an unknown subcommand is one line naming the closest one, if one is close (click 8.1
    names none, later versions their own pick)."""

    context_class = Context
    command_class = Command

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        show_variables(self)

    def resolve_command(
        self, ctx: click.Context, args: List[str]
    ) -> Tuple[Optional[str], Optional[click.Command], List[str]]:
        name = args[0] if args else ""
        if not (name.startswith("-") or ctx.resilient_parsing or self.get_command(ctx, name)):
            shown = f"`{ctx.command_path} {{}}`"
            hint = did_you_mean(name, self.list_commands(ctx), shown=shown)
            msg = f"no such command: {ctx.command_path} {name}{hint}"
            raise UsageError(msg)
        return super().resolve_command(ctx, args)


def show_variables(command: click.Command) -> None:
    """``--help`` shows each option's ``MALAUNCH_*`` variable, framework options included."""
    for param in command.params:
        if isinstance(param, click.Option):
            param.show_envvar = True


Group.group_class = Group


@contextlib.contextmanager
def about(flag: str) -> Iterator[None]:
    """An error raised in the body by code that does not know the option (``PluginSet``'s
    "unknown framework") is about ``flag``'s value: its line starts with the option, which
    :class:`Context` turns into the variable where the value came from one."""
    try:
        yield
    except MalaunchError as exc:
        exc.args = (f"{flag}: {exc}",)
        raise
