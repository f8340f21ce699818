"""(f) of SPEC §9 "Replacement": a real 2 x 2 PyTorch DDP job (gloo, CPU) that checkpoints
every step loses node 1's launcher mid-training; its printed command is run again, the new
launcher rejoins, and attempt 1 resumes from the checkpoint and finishes, on node launchers
started from ``simulate --print-env``'s commands."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest
from launchers import Launchers, printed_nodes, recorded_pids

from malaunch.testing import wait_gone

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(300)]

WORKER = Path(__file__).parents[1] / "workers" / "torch_checkpointed.py"


@pytest.fixture(autouse=True)
def _torch_installed() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.fail(f"torch is not installed in {sys.executable}: pip install '.[torch]'")


def test_f_a_torch_job_resumes_from_its_checkpoint_on_a_replaced_node(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    args = [
        "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano",
        "--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs"),
        "--platform-dir", str(tmp_path / "platform"), "--max-restarts", "1",
        "--", sys.executable, str(WORKER), str(out), "--steps", "12",
    ]  # fmt: skip
    nodes = printed_nodes(args, cwd=tmp_path)
    step_file = out / "step-3"
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        deadline = time.monotonic() + 180
        while not (step_file.exists() and int(step_file.read_text() or -1) >= 3):
            assert time.monotonic() < deadline, launchers.output()
            time.sleep(0.05)
        launchers.procs[1].kill()  # mid-training: node 1's launcher and its two ranks die
        launchers.procs[1].wait(timeout=10)
        time.sleep(2)
        assert launchers.procs[0].poll() is None, launchers.output()
        launchers.start(1)
        codes = launchers.wait(timeout=240)
        output = launchers.output()
    assert codes == {0: 0, 1: 0}, output
    resumed = {rank: int((out / f"resumed-{rank}-1").read_text()) for rank in range(4)}
    assert len(set(resumed.values())) == 1 and resumed[0] >= 4, resumed  # from the checkpoint
    checksums = {(out / f"done-{rank}").read_text() for rank in range(4)}
    assert len(checksums) == 1  # every rank finished with the same parameters
    assert "node 1 lost: waiting up to 600s for its replacement" in launchers.output(0)
    assert wait_gone(recorded_pids(out)) == []
