"""Run ``malaunch``'s console entry point many times, fast: one forked child per request.

Started once by the generated hostile-input suite (``tests/e2e/test_hostile_generated.py``).
It imports malaunch and its plugins once; each request (a JSON line on stdin: ``args``,
``env``, ``cwd``, ``timeout``) is then run in a forked child that is what a real ``malaunch``
process is after its imports: its own session, stdin ``/dev/null``, stdout and stderr in
files, the request's environment and working directory, and ``console_main()``, which ends
the process with the launcher's exit code. A child still running at ``timeout`` is killed
with its process group and reported as such. Each answer is a JSON line on stdout: ``code``,
``stdout``, ``stderr``, ``seconds``, ``timed_out``.

A fork costs a few milliseconds, where starting the interpreter and importing click, pydantic
and the plugins costs a few hundred: thousands of cases fit in a CI run.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from typing import IO, Any, Dict, Tuple

KEEP = 20_000  # characters of each stream sent back


# What any command imports, so that children start warm.
PRELOAD = (
    "malaunch.cli.main",
    "malaunch.cli.render",
    "malaunch.cli.simulate",
    "malaunch.cli.tools",
    "malaunch.report.write",
    "malaunch.supervisor.supervise",
)


def _preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    plugins = importlib.import_module("malaunch.plugins")
    plugins.load_plugins(os.environ)  # imports every plugin module once


def _child(request: Dict[str, Any], out: IO[bytes], err: IO[bytes]) -> None:
    """In the forked child: become a fresh ``malaunch`` process and run it; never returns."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["malaunch", *request["args"]]
        importlib.import_module("malaunch.cli.main").console_main()  # exits with its code
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
    os._exit(1)


def _wait(pid: int, timeout: float) -> Tuple[int, bool]:
    """The child's exit code (128+N for signal N), and whether it had to be killed."""
    deadline = time.monotonic() + timeout
    pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    timed_out = False
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(left, 0.005))
    finally:
        if pidfd is not None:
            os.close(pidfd)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # whatever the child left in its session
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status), timed_out
    return os.WEXITSTATUS(status), timed_out


def _text(stream: IO[bytes]) -> str:
    stream.seek(0)
    return stream.read().decode("utf-8", "replace")[:KEEP]


def run_one(request: Dict[str, Any]) -> Dict[str, Any]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(request, out, err)
        code, timed_out = _wait(pid, float(request["timeout"]))
        seconds = time.monotonic() - started
        return {
            "code": code,
            "stdout": _text(out),
            "stderr": _text(err),
            "seconds": seconds,
            "timed_out": timed_out,
        }


def main() -> None:
    _preload()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(run_one(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
