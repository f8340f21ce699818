"""Lines a newcomer read twice (issue 22.5), each asserted as it is printed now: the topology's
node lines, the hang's reason, what ``simulate`` says at its end and on Ctrl-C, its summary
table, and the report of a simulation."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from malaunch.testing import clean_env, malaunch_executable, read_env_file, run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures"
WORKERS = Path(__file__).parents[1] / "workers"


def node_lines(env: Dict[str, str]) -> List[str]:
    result = run_cli(["topology"], env=env)
    assert result.code == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line[3:].startswith("node ")]


def test_topology_nodes_without_devices_and_with_one_rank(tmp_path: Path) -> None:
    # was "node 0: a [ps] no devices devices " and "node 2: c [worker] ranks 0-0 devices 0"
    env = clean_env({"TF_PS_HOSTS": "a:2222,b:2222", "TF_WORKER_HOSTS": "c:2222,d:2222"})
    env.update({"MA_TASK_NAME": "ps", "VC_TASK_INDEX": "1", "MALAUNCH_VOLCANO_DIR": str(tmp_path)})
    assert node_lines(env) == [
        "   node 0: a [ps] no devices",
        " * node 1: b [ps] no devices",
        "   node 2: c [worker] rank 0 on device 0",
        "   node 3: d [worker] rank 1 on device 0",
    ]


def test_topology_names_a_kubeflow_host_once(tmp_path: Path) -> None:
    # was "node 0: bert-master-0 bert-master-0 ranks 0-3 devices 0,1,2,3"
    env = clean_env(read_env_file(FIXTURES / "env" / "kubeflow_pytorchjob_worker.env"))
    env["MALAUNCH_VOLCANO_DIR"] = str(tmp_path)
    assert node_lines(env) == [
        "   node 0: bert-master-0 ranks 0-3 on devices 0,1,2,3",
        "   node 1: bert-worker-0 ranks 4-7 on devices 0,1,2,3",
        " * node 2: bert-worker-1 ranks 8-11 on devices 0,1,2,3",
        "   node 3: bert-worker-2 ranks 12-15 on devices 0,1,2,3",
    ]


def test_the_hang_reason_names_the_odd_rank_then_the_others(tmp_path: Path) -> None:
    # was "hang: most ranks wait in wait_for_peer (job_worker.py:34); these are elsewhere;
    # odd ranks: 1"
    worker = WORKERS / "job_worker.py"
    source = worker.read_text().splitlines()
    stall = source.index("        time.sleep(0.05)") + 1  # stall_here's loop, the first
    wait = source.index("        time.sleep(0.05)", stall) + 1  # wait_for_peer's
    out = tmp_path / "out"
    out.mkdir()
    args = ["--framework", "torch_ddp", "--nproc-per-node", "4", "--log-dir", str(tmp_path)]
    args += ["--hang-timeout", "2", "--hang-stacks", "faulthandler"]
    args += ["--", sys.executable, str(worker), str(out), "--stall", "1", "--steps", "100"]
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 124, result.stderr
    lines = result.stderr.splitlines()
    hang = [line for line in lines if line.startswith("malaunch: info:   hang")]
    assert hang == [
        f"malaunch: info:   hang: rank 1 is elsewhere, in stall_here (job_worker.py:{stall}), "
        f"while ranks 0,2-3 wait in wait_for_peer (job_worker.py:{wait})"
    ]


@pytest.fixture(scope="module")
def simulated_7(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """A two-node simulation whose rank 1 (node 1) exits 7; node 0 is stopped (75)."""
    tmp_path = tmp_path_factory.mktemp("simulated_7")
    code = "import os, sys, time; time.sleep(0.5); sys.exit(7 if os.environ['RANK'] == '1' else 0)"
    args = [malaunch_executable(), "simulate", "--nodes", "2", "--platform", "volcano"]
    args += ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs")]
    args += ["--", sys.executable, "-c", code]
    return subprocess.run(
        args, cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def test_simulate_says_nothing_after_its_nodes_have_exited(
    simulated_7: subprocess.CompletedProcess[str],
) -> None:
    # The parent used to add "node 1 exited with code 7: stopping" once both had exited.
    assert simulated_7.returncode == 7, simulated_7.stderr
    lines = [re.sub(r"pid \d+", "pid N", line) for line in simulated_7.stderr.splitlines()]
    summary = next(i for i, line in enumerate(lines) if line.startswith("malaunch: info: summary"))
    # One error line, the failure that ended the job; node 0's 75 only follows from it.
    assert sorted(lines[1:summary]) == [
        "malaunch: error: node 1 (pid N) exited with code 7",
        "malaunch: warning: node 0 (pid N) exited with code 75",
    ]


def test_simulate_summary_numbers_its_nodes_under_node(
    simulated_7: subprocess.CompletedProcess[str],
) -> None:
    lines = simulated_7.stderr.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("malaunch: info: summary"))
    assert re.fullmatch(r"malaunch: info:   ROLE  NODE  PID +EXIT  TIME +LOG", lines[summary + 1])
    assert re.match(r"malaunch: info:   node  1     \d+ +7 ", lines[summary + 3])


def test_the_report_of_a_simulation_gives_each_attempt_the_jobs_code(
    simulated_7: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    # Node 0's summary, which the report reads first, says 75 for the attempt.
    logs = Path(simulated_7.args[simulated_7.args.index("--log-dir") + 1])
    result = run_cli(["report", str(logs), "--html", str(tmp_path / "report.html")])
    assert result.code == 0, result.stderr
    page = (tmp_path / "report.html").read_text()
    table = page.split('<section id="attempts">', 1)[1].split("</section>", 1)[0]
    cells = re.findall(r"<td>(.*?)</td>", table)
    assert cells == [
        "0",
        "7",
        "rank 1 on node 1 exited with code 7",
        "no restarts allowed (--max-restarts 0)",
        "-",  # restart delay
        "-",  # nodes lost
    ]


SLOW_TO_STOP = """\
import os, signal, sys, time
def stop(*_):
    if os.environ["RANK"] == "1":
        time.sleep(1.5)  # node 1 still stops while node 0's launcher has already left
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(60)
"""


def test_ctrl_c_on_simulate_is_no_lost_launcher(tmp_path: Path) -> None:
    # was "[node 1] malaunch: error: job channel: lost node 0's launcher (node 0's launcher
    # closed the connection)": node 0 had ended its part of a job that was over.
    script = tmp_path / "slow_to_stop.py"
    script.write_text(SLOW_TO_STOP)
    args = [malaunch_executable(), "simulate", "--nodes", "2", "--platform", "volcano"]
    args += ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs")]
    args += ["--", sys.executable, str(script)]
    with subprocess.Popen(
        args, cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None
        ready = 0
        deadline = time.monotonic() + 60
        while ready < 2 and time.monotonic() < deadline:
            ready += proc.stdout.readline().endswith("] ready\n")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    said = [line for line in (out + err).splitlines() if "malaunch: error" in line]
    assert said == []
    assert "[node 1] malaunch: warning: received SIGINT: stopping 1 process" in out
