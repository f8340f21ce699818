"""The launcher's logger, imported lazily.

loguru pulls in asyncio and multiprocessing (about 70 ms of CPU), which a launch would pay
before its first worker starts. Modules log through :data:`logger`, a stand-in that skips
messages below the configured level without importing loguru, and hands everything else to
loguru's logger with the sink the CLI configured.

A launcher message is one line, whatever the values in it: a value from the environment or a
file (a path holding a newline, an escape sequence) is shown through :func:`shown`, and the
CLI's sink passes every message through :func:`escape_controls` as well, so that no value can
start a line of its own or move a terminal's cursor.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

MAX_REPEATS = 3  # warnings of one kind printed before "... and N more"

LEVELS = {"DEBUG": 10, "INFO": 20, "SUCCESS": 25, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}

_threshold = LEVELS["DEBUG"]
_configure: Optional[Callable[[Any], None]] = None
_real: Any = None


def shown(value: str) -> str:
    """``value`` as is when it is printable, else its ``repr``: quoted, control characters
    escaped, so that ``/x<newline>/y`` cannot print as two lines."""
    return value if value.isprintable() else repr(value)


def escape_controls(text: str) -> str:
    """``text`` with every unprintable character (newlines, tabs, escape sequences, bidi
    overrides) escaped as in a ``repr``, the rest untouched."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def set_up(level: str, configure: Callable[[Any], None]) -> None:
    """Record the level and the function that installs sinks on loguru's logger (the CLI)."""
    global _threshold, _configure, _real  # noqa: PLW0603 (one logger per process)
    _threshold = LEVELS[level]
    _configure = configure
    _real = None


def _loguru() -> Any:
    global _real  # noqa: PLW0603 (one logger per process)
    if _real is None:
        from loguru import logger as real  # noqa: PLC0415 (the point of this module)

        if _configure is not None:
            _configure(real)
        _real = real
    return _real


class LazyLogger:
    """The few loguru methods malaunch uses, each importing loguru only when it prints."""

    def _log(self, level: str, message: str, args: Any, kwargs: Any) -> None:
        if LEVELS[level] >= _threshold:
            _loguru().opt(depth=2).log(level, message, *args, **kwargs)

    def debug(self, message: str, *args: Any, **kwargs: Any) -> None:
        self._log("DEBUG", message, args, kwargs)

    def info(self, message: str, *args: Any, **kwargs: Any) -> None:
        self._log("INFO", message, args, kwargs)

    def warning(self, message: str, *args: Any, **kwargs: Any) -> None:
        self._log("WARNING", message, args, kwargs)

    def error(self, message: str, *args: Any, **kwargs: Any) -> None:
        self._log("ERROR", message, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        """Anything else (add, remove, opt, ...) is loguru's own."""
        return getattr(_loguru(), name)


logger = LazyLogger()
