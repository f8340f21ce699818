"""Fixtures for the supervisor tests: a job directory of real tiny workers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator, List

import pytest
from loguru import logger

# The helpers live beside the worker scripts so the e2e tests can use them too.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workers"))

from jobs import Job


@pytest.fixture
def job(tmp_path: Path) -> Job:
    return Job(tmp_path)


@pytest.fixture
def messages() -> Iterator[List[str]]:
    """The launcher's own messages (loguru), one string per message."""
    caught: List[str] = []
    sink = logger.add(lambda message: caught.append(str(message).rstrip("\n")), format="{message}")
    yield caught
    logger.remove(sink)
