"""malaunch: one launcher for distributed training jobs.

Plugin authors import :mod:`malaunch.api` (and :mod:`malaunch.testing` in their tests); training
scripts import :mod:`malaunch.context`. ``docs/architecture.md`` maps the rest. This module
stays standard-library only: ``import malaunch.context`` imports it first.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
