"""Project-wide test guards, and the ``free_port`` fixture.

The suite runs in two processes at once (``pytest -n 2``, pytest-xdist; see tests/README.md):
a test must not depend on a port, file or process that another test may hold at the same time.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from ports import Reservations


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


@pytest.fixture
def free_port() -> Iterator[Reservations]:
    """``free_port()`` -> a loopback port reserved for this test: no other test or process is
    given it until the test ends, while a server of the test may still listen on it
    (``tests/ports.py`` says how). Never bind port 0, close, and pass the number on."""
    ports = Reservations()
    yield ports
    ports.close()
