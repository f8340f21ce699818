"""The built-in `tensorflow_ps` framework plugin (hook implementations only)."""

from __future__ import annotations

from typing import List

from malaunch.hookspecs import hookimpl
from malaunch.models import Framework


@hookimpl
def malaunch_register_frameworks() -> List[Framework]:
    return []
