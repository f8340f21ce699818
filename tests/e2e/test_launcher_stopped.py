"""A launcher stopped for a while (SIGSTOP: a debugger, a paused container, a frozen VM) and
continued never takes its own absence for a rank's silence.

The launcher, stopped in its wait or in a callback, came back with its timers due and its
ranks' output unread (Python even gives up an interrupted ``epoll_wait`` past its deadline
without looking at what is ready): the hang timer fired first, and a healthy
job ended with exit 124. The stop's length is generated, always past ``--hang-timeout``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from malaunch.testing import clean_env, malaunch_executable

BUSY = "import time\nfor i in range(80):\n    print(i, flush=True)\n    time.sleep(0.1)\n"


@settings(
    max_examples=3,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(stopped_for=st.floats(2.5, 4.0))
def test_a_launcher_stopped_past_the_hang_timeout_finds_its_ranks_busy(
    tmp_path: Path, stopped_for: float
) -> None:
    args = ["--framework", "torch_ddp", "--nproc-per-node", "2", "--hang-timeout", "2"]
    proc = subprocess.Popen(
        [malaunch_executable(), *args, "--log-dir", "logs", "--", sys.executable, "-c", BUSY],
        env=clean_env(),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # the ranks are up
    proc.send_signal(signal.SIGSTOP)
    time.sleep(stopped_for)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "silent" not in err
