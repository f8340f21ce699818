"""What a node that could not join names (malaunch.job.client.Causes): each cause counted, in
words that agree with their counts ("of 1 try", "1 connection attempt")."""

from __future__ import annotations

from malaunch.job.client import Causes, ClosedEarly
from malaunch.job.settings import JobSettings

JOB = JobSettings(1, 2, "127.0.0.1", 29500, b"t" * 32, wait_timeout=1.0)


def test_one_try_is_said_as_one() -> None:
    causes = Causes()
    causes.add(ConnectionRefusedError(111, "Connection refused"))
    assert causes.message("127.0.0.1:29500", JOB) == (
        "node 0's launcher at 127.0.0.1:29500 (job channel, --job-port) did not accept node 1 "
        "within 1s: [Errno 111] Connection refused; of 1 try: 1 connection attempt refused "
        "(nothing listens there) (is malaunch running on node 0, and does every Service or "
        "firewall between the nodes pass port 29500? --no-job-channel runs without the channel)"
    )


def test_several_causes_are_counted_most_first() -> None:
    causes = Causes()
    for _ in range(3):
        causes.add(ClosedEarly("node 0 closed the connection before the handshake"))
    causes.add(TimeoutError("timed out"))
    assert causes.message("127.0.0.1:29500", JOB) == (
        "node 0's launcher at 127.0.0.1:29500 (job channel, --job-port) did not let node 1 in "
        "within 1s; of 4 tries: node 0 closed 3 connection attempts before the handshake, 1 "
        "connection attempt timed out (another program floods the job port, or node 0 was going "
        "away); last error: timed out"
    )
