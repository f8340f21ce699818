"""Calling a plugin's code: whatever it raises or returns wrongly is a plugin error (78).

A framework's ``plan`` and a topology source's ``detect`` and ``resolve`` are third-party code.
Their bad input errors are theirs to raise (:class:`~malaunch.errors.MalaunchError`, with its
code); anything else they raise (a ``RuntimeError``, a ``RecursionError``, ``SystemExit``
from a ``sys.exit`` that would pass a plugin's number off as a rank's exit code) and a plan
that breaks the contract the supervisor relies on (not a ``LaunchPlan``, two processes with
one rank or one log file, a NUL that no system call takes) is one line naming the plugin and
its distribution, exit 78, not an internal error (70) nor a job that runs two ranks 0 into
one log. What the plugin prints meanwhile goes to stderr, never into a document on stdout.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, Dict, Iterator, List, Optional, TypeVar

from malaunch.errors import MalaunchError, PluginError
from malaunch.models import LaunchPlan
from malaunch.plugins import PLUGIN_FAILURES, Origin, failure_text

T = TypeVar("T")


def call_plugin(what: str, origin: Optional[Origin], call: Callable[[], T]) -> T:
    """``call()``, with what it raises turned into a :class:`PluginError` naming ``what``
    (``framework 'x'``) and ``origin``; the launcher's own errors pass as they are."""
    try:
        with _output_to_stderr():
            return call()
    except MalaunchError:
        raise
    except PLUGIN_FAILURES as exc:
        raise PluginError(f"{_named(what, origin)} failed: {failure_text(exc)}") from exc


@contextlib.contextmanager
def _output_to_stderr() -> Iterator[None]:
    """What a plugin prints, with ``print`` or on descriptor 1 itself, goes to stderr while
    its code runs: stdout may be a document that a program reads (the dry run's plan as
    JSON, ``topology --json``), which a plugin's debug line would break."""
    _flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        _flush()
        os.dup2(saved, 1)
        os.close(saved)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


def check_plan(plan: object, what: str, origin: Optional[Origin]) -> LaunchPlan:
    """``plan`` if it keeps the contract the supervisor relies on; else a PluginError."""
    if not isinstance(plan, LaunchPlan):
        kind = type(plan).__name__
        msg = f"{_named(what, origin)} returned {kind} from plan(), not a LaunchPlan"
        raise PluginError(msg)
    problems = _problems(plan)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        listed = "; ".join(problems[:3]) + more
        raise PluginError(f"{_named(what, origin)} planned what cannot run: {listed}")
    return plan


def _problems(plan: LaunchPlan) -> List[str]:
    found: List[str] = []
    ranks: Dict[int, int] = {}
    logs: Dict[str, int] = {}
    for index, spec in enumerate(plan.processes):
        if spec.rank is not None:
            if spec.rank in ranks:
                found.append(f"processes {ranks[spec.rank]} and {index} both have rank {spec.rank}")
            ranks.setdefault(spec.rank, index)
        if spec.log_file in logs:
            first = logs[spec.log_file]
            found.append(f"processes {first} and {index} share the log file {spec.log_file}")
        logs.setdefault(spec.log_file, index)
        texts = [*spec.argv, spec.cwd, spec.log_file, *spec.env, *spec.env.values()]
        if any("\0" in text for text in texts):
            found.append(f"process {index} has a NUL character in its command, env or paths")
    return found


def _named(what: str, origin: Optional[Origin]) -> str:
    return f"{what} ({origin.describe()})" if origin is not None else what
