"""The launcher's logger, imported lazily.

loguru pulls in asyncio and multiprocessing (about 70 ms of CPU), which a launch would pay
before its first worker starts. Modules log through :data:`logger`, a stand-in that skips
messages below the configured level without importing loguru, and hands everything else to
loguru's logger with the sink the CLI configured.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

LEVELS = {"DEBUG": 10, "INFO": 20, "SUCCESS": 25, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}

_threshold = LEVELS["DEBUG"]
_configure: Optional[Callable[[Any], None]] = None
_real: Any = None


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
