"""Capturing this node's ranks' stacks when the job reports a hang (``capture`` command).

py-spy reads every running worker at once and leaves it running; workers it cannot read (no
py-spy, no ptrace permission, not Python) are sent SIGABRT so that faulthandler prints their
stacks into their logs (see :mod:`malaunch.hang.stacks` for why each). The result is one file
per rank under ``<log dir>/stacks/attempt-<n>/`` and, for the job, each rank's innermost frames.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from malaunch.events import EventLoop, Timer
from malaunch.files import write_atomic
from malaunch.hang.stacks import (
    Stack,
    abort_for_faulthandler,
    faulthandler_from_log,
    find_py_spy,
    py_spy_dumps,
)
from malaunch.log import logger
from malaunch.supervisor.group import Group
from malaunch.supervisor.output import describe
from malaunch.supervisor.spawn import Child
from malaunch.wording import plural

FAULTHANDLER_WAIT = 5.0  # for aborted ranks to print their stacks and die
FRAMES_REPORTED = 5  # per rank, to node 0: blame needs the innermost one


class StackCapture:
    """One capture: py-spy at once, faulthandler for the rest, then ``on_ready(entries)``."""

    def __init__(
        self,
        loop: EventLoop,
        group: Group,
        *,
        node: int,
        attempt: int,
        log_dir: str,
        method: str,
        on_ready: Callable[[List[Dict[str, Any]]], None],
    ) -> None:
        self.loop = loop
        self.group = group
        self.node = node
        self.folder = Path(log_dir) / "stacks" / f"attempt-{attempt}"
        self.method = method
        self.on_ready = on_ready
        self.targets: List[Child] = []
        self.stacks: Dict[int, Stack] = {}
        self.aborted: List[Child] = []
        self.timer: Optional[Timer] = None
        self.done = False

    def start(self) -> None:
        self.targets = [c for c in self.group.running() if not c.spec.service]
        if self.method in ("auto", "py-spy"):
            py_spy = find_py_spy(os.environ)
            if py_spy is not None:
                self.stacks = py_spy_dumps(py_spy, [child.pid for child in self.targets])
            elif self.method == "py-spy":
                logger.warning("--hang-stacks py-spy: py-spy is not installed (pip install py-spy)")
        if self.method in ("auto", "faulthandler"):
            for child in self.targets:
                if child.pid not in self.stacks and abort_for_faulthandler(child.pid):
                    self.aborted.append(child)
        if self.aborted:
            self.timer = self.loop.call_later(FAULTHANDLER_WAIT, self._finish)
        else:
            self._finish()

    def poll(self) -> None:
        """After each round of events: finished once every aborted rank's log is complete."""
        if not self.done and self.aborted and all(c.pipe_fd < 0 for c in self.aborted):
            self._finish()

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
        entries = [self._entry(child) for child in self.targets]
        methods = sorted({entry["method"] for entry in entries})
        how = ", ".join(methods) or "none"
        logger.info(f"stacks of {plural(len(entries), 'rank')} ({how}) in {self.folder}")
        self.on_ready(entries)

    def _entry(self, child: Child) -> Dict[str, Any]:
        stack = self.stacks.get(child.pid)
        if stack is None and child in self.aborted:
            stack = faulthandler_from_log(child.spec.log_file)
        name = f"rank-{child.spec.rank}" if child.spec.rank is not None else describe(child.spec)
        path = self.folder / f"{name.replace(' ', '-')}.txt"
        text = stack.text if stack is not None else "no stack could be read\n"
        try:
            write_atomic(
                path, f"# {describe(child.spec)} (pid {child.pid}) on node {self.node}\n{text}"
            )
        except OSError as exc:
            logger.warning(f"cannot write {path}: {exc}")
        return {
            "rank": child.spec.rank,
            "role": child.spec.role,
            "frames": list(stack.frames[:FRAMES_REPORTED]) if stack is not None else [],
            "file": str(path),
            "method": stack.method if stack is not None else "none",
        }
