"""Project-wide test guards."""

from __future__ import annotations

import os
from typing import Iterator

import pytest


@pytest.fixture(autouse=True)
def _no_environ_leak() -> Iterator[None]:
    """Fail a test that changes os.environ and does not put it back (tox does the same)."""
    # pytest itself rewrites PYTEST_CURRENT_TEST at every phase of a test.
    before = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    yield
    after = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        for key in changed:
            if key in before:
                os.environ[key] = before[key]
            else:
                os.environ.pop(key, None)
        pytest.fail(f"test leaked changes to os.environ: {changed}")
