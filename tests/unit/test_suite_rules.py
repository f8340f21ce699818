"""The rules of tests/README.md for tests that run side by side, where a look at the test
sources can check them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

TESTS = Path(__file__).resolve().parents[1]
# test_net.py and test_local.py test malaunch.net.free_port itself; conftest.py holds the
# fixture, ports.py the reservations it hands out.
ALLOWED = {
    TESTS / "unit" / "test_net.py",
    TESTS / "unit" / "topology" / "test_local.py",
    TESTS / "conftest.py",
    TESTS / "ports.py",
}
OWN_HELPER = re.compile(r"^\s*def free_port\(", re.MULTILINE)
LAUNCHERS_HELPER = re.compile(r"^from malaunch\.net import .*\bfree_port\b", re.MULTILINE)


def offenders(pattern: re.Pattern[str]) -> List[str]:
    return sorted(
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("*.py")
        if path not in ALLOWED and pattern.search(path.read_text(encoding="utf-8"))
    )


def test_tests_take_ports_from_the_free_port_fixture() -> None:
    """A helper that binds port 0, closes and hands the number on lets another test (or
    process) be given the same port; the ``free_port`` fixture keeps it reserved."""
    assert offenders(OWN_HELPER) == []
    assert offenders(LAUNCHERS_HELPER) == []
