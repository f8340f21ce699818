"""Project-wide test guards."""

from __future__ import annotations

import os
from typing import Iterator

import pytest


@pytest.fixture(autouse=True)
def _no_environ_leak() -> Iterator[None]:
    """Fail a test that changes os.environ and does not put it back (tox does the same)."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        os.environ.clear()
        os.environ.update(before)
        pytest.fail(f"test leaked changes to os.environ: {changed}")
