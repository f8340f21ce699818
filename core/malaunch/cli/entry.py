"""The ``malaunch`` console script's first lines.

The stopping signals (:mod:`malaunch.stopping`) raise :class:`~malaunch.stopping.Stopped` from
here on, before click, pydantic and the plugins are imported (a tenth of a second in which a
SIGINT used to print a ``KeyboardInterrupt`` traceback and a SIGTERM to kill the launcher
without a word). Then :func:`malaunch.cli.main.console_main` runs, whose error boundary says
such a stop in one line.
"""

from __future__ import annotations

import contextlib
import os

from malaunch.stopping import Stopped, raise_on_stop_signals, stop_line


def console_main() -> None:
    """The ``malaunch`` command."""
    raise_on_stop_signals()
    try:
        from malaunch.cli.main import console_main as run  # noqa: PLC0415 (after the handlers)
    except Stopped as exc:
        with contextlib.suppress(OSError):
            os.write(2, stop_line(exc.signum).encode())
        os._exit(128 + exc.signum)
    run()
