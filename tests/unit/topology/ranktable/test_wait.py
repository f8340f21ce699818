"""Waiting for a rank table the platform is still writing (in place, with O_TRUNC)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import List

import pytest

from malaunch.errors import ExitCode, NotReadyError
from malaunch.models import ResolveOptions
from malaunch.topology.ranktable import source
from malaunch.topology.ranktable.read import MIN_POLL, Location, Ready, wait_ready

SHARED = Path(__file__).parents[3] / "fixtures" / "shared"
INITIALIZING = (SHARED / "ranktable_template2_initializing.json").read_text()
COMPLETED = (SHARED / "ranktable_template2_2pods_8dev.json").read_text()
POD_1 = "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001-worker-1"


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: List[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def write_in_place(path: Path, text: str) -> None:
    """What ascend-operator does: truncate and write the same file, no rename."""
    with path.open("w", encoding="utf-8") as handle:
        handle.write(text)


class Writer(threading.Thread):
    """A platform writing the table in three steps: initializing, truncated, completed.

    Each step waits until the reader has looked at the previous one (it signals through the
    sleep it takes between reads), so the test sees every state on any machine load.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.steps = [COMPLETED[: len(COMPLETED) // 3], COMPLETED]
        self.looked = threading.Event()
        self.seen: List[str] = []
        write_in_place(path, INITIALIZING)

    def reader_sleeps(self, seconds: float) -> None:
        self.seen.append(self.path.read_text())
        self.looked.set()
        time.sleep(seconds)

    def run(self) -> None:
        for text in self.steps:
            if not self.looked.wait(timeout=10):
                return
            self.looked.clear()
            write_in_place(self.path, text)


def test_resolve_waits_for_a_background_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = Writer(tmp_path / "jobstart_hccl.json")

    def wait_with_writer(location: Location, timeout: float, poll: float) -> Ready:
        return wait_ready(location, timeout, poll, sleep=writer.reader_sleeps)

    monkeypatch.setattr(source, "wait_ready", wait_with_writer)
    options = ResolveOptions(
        wait_timeout=20, poll_interval=0.02, log_dir=str(tmp_path / "logs"), hostnames=()
    )
    env = {"RANK_TABLE_FILE": str(tmp_path), "MA_CURRENT_INSTANCE_NAME": POD_1}
    writer.start()
    try:
        topo = source.resolve(env, options)
    finally:
        writer.join(timeout=10)
    assert topo.node_rank == 1
    assert topo.world_size == 16
    assert [n.host for n in topo.nodes] == ["192.0.2.21", "192.0.2.22"]
    # It looked at the initializing and the truncated file, and waited on through both.
    assert writer.seen[0] == INITIALIZING
    assert COMPLETED[: len(COMPLETED) // 3] in writer.seen
    assert writer.seen[-1] == COMPLETED


def test_timeout_reports_the_last_reason(tmp_path: Path) -> None:
    path = tmp_path / "hccl.json"
    write_in_place(path, INITIALIZING)
    options = ResolveOptions(wait_timeout=0.2, poll_interval=0.05, log_dir=str(tmp_path))
    with pytest.raises(NotReadyError) as info:
        source.resolve({"RANK_TABLE_FILE": str(path)}, options)
    assert info.value.exit_code == ExitCode.UNAVAILABLE
    assert int(info.value.exit_code) == 69
    assert str(info.value) == (
        f'rank table {path} (from RANK_TABLE_FILE) not ready after 0.2s: status is "initializing" '
        "(see --wait-timeout)"
    )


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "the file is empty"),
        (
            '{"status": "compl',
            "not valid JSON: Unterminated string starting at: line 1 column 12 (char 11)",
        ),
        ('{"version": "1.0"}', 'status is missing (expected "completed")'),
    ],
)
def test_not_ready_reasons(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "hccl.json"
    write_in_place(path, content)
    fake = FakeTime()
    with pytest.raises(NotReadyError) as info:
        wait_ready(Location(path, "from X"), 1.0, 0.25, fake.clock, fake.sleep)
    assert str(info.value).endswith(f"not ready after 1s: {reason} (see --wait-timeout)")
    assert fake.sleeps == [0.25, 0.25, 0.25, 0.25]  # a read every poll interval until the deadline


def test_zero_timeout_reads_once_plus_the_confirming_read(tmp_path: Path) -> None:
    path = tmp_path / "hccl.json"
    write_in_place(path, COMPLETED)
    fake = FakeTime()
    ready = wait_ready(Location(path, "from X"), 0, 0.2, fake.clock, fake.sleep)
    assert ready.data["group_count"] == "1"
    assert fake.sleeps == [0.2]
    write_in_place(path, INITIALIZING)
    fake = FakeTime()
    with pytest.raises(NotReadyError):
        wait_ready(Location(path, "from X"), 0, 0.2, fake.clock, fake.sleep)
    assert fake.sleeps == []


def test_a_table_that_changes_between_reads_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "hccl.json"
    write_in_place(path, COMPLETED)
    rewritten = COMPLETED.replace('"192.0.2.22"', '"192.0.2.23"')
    fake = FakeTime()

    def sleep(seconds: float) -> None:
        if not fake.sleeps:  # the writer regenerates the table right after our first read
            write_in_place(path, rewritten)
        fake.sleep(seconds)

    ready = wait_ready(Location(path, "from X"), 5, 0.1, fake.clock, sleep)
    assert ready.raw == rewritten.encode()
    assert len(fake.sleeps) == 3  # confirm (differs), retry pause, confirm (same)

    write_in_place(path, COMPLETED)
    fake = FakeTime()
    with pytest.raises(NotReadyError) as info:
        wait_ready(Location(path, "from X"), 0, 0.1, fake.clock, sleep)
    assert "the file changed between two reads (still being written)" in str(info.value)


def test_a_zero_poll_interval_does_not_spin(tmp_path: Path) -> None:
    path = tmp_path / "hccl.json"
    write_in_place(path, INITIALIZING)
    fake = FakeTime()
    with pytest.raises(NotReadyError):
        wait_ready(Location(path, "from X"), 0.05, 0, fake.clock, fake.sleep)
    assert fake.sleeps
    assert all(seconds >= MIN_POLL for seconds in fake.sleeps)
