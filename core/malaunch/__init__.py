"""malaunch: one launcher for distributed training jobs.

The public API for plugin authors is re-exported here; see ``docs/plugins.md``.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
