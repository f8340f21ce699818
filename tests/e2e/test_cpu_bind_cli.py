"""``--cpu-bind`` through the installed command (issue 23).

Two kinds of evidence, kept apart on purpose. Real ranks report ``os.sched_getaffinity(0)``
(``tests/workers/affinity.py``) and must equal the plan, on this machine's own CPUs: ``even``,
LIST, ``numa`` from small machine trees whose CPUs are this machine's (``two-node-*``), and a
launcher whose own affinity is narrowed as a container's cpuset would. The plans of 8-device
servers (DGX A100, Atlas 800T A2; ``tests/fixtures/machines``) are checked as plans
(``--dry-run``): their CPUs do not exist here, and a launch that would bind to them is refused
(71), not faked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Set

import pytest

from malaunch.testing import CliResult, clean_env, malaunch_executable, read_summary, run_cli

TESTS = Path(__file__).resolve().parents[1]
MACHINES = TESTS / "fixtures" / "machines"
AFFINITY = TESTS / "workers" / "affinity.py"
DGX = MACHINES / "dgx-a100"
ATLAS = MACHINES / "atlas-800t-a2"
DGX_NUMA = [
    *["48-63,176-191"] * 2,
    *["16-31,144-159"] * 2,
    *["112-127,240-255"] * 2,
    *["80-95,208-223"] * 2,
]
ATLAS_NUMA = ["144-167", "0-23", "144-167", "0-23", "96-119", "48-71", "96-119", "48-71"]

pytestmark = pytest.mark.skipif(
    not {0, 1} <= os.sched_getaffinity(0), reason="needs CPUs 0 and 1 (this machine has them)"
)


def _args(tmp_path: Path, *options: str, nproc: int = 2, framework: str = "torch_ddp") -> List[str]:
    return [
        "--framework", framework, "--topology", "local", "--nproc-per-node", str(nproc),
        "--log-dir", str(tmp_path / "logs"), *options, "--",
        sys.executable, "-S", str(AFFINITY), str(tmp_path / "reports"),
    ]  # fmt: skip


def launch(tmp_path: Path, *options: str, nproc: int = 2, cpus: Optional[Set[int]] = None,
           env: Optional[Dict[str, str]] = None) -> CliResult:  # fmt: skip
    """Run real ranks of the affinity worker; ``cpus`` narrows the launcher's own affinity
    before it starts, as a container's cpuset or ``taskset`` would."""
    (tmp_path / "reports").mkdir(exist_ok=True)
    proc = subprocess.run(
        [malaunch_executable(), *_args(tmp_path, *options, nproc=nproc)],
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def dry_run(tmp_path: Path, *options: str, nproc: int = 8, framework: str = "torch_ddp",
            env: Optional[Dict[str, str]] = None) -> CliResult:  # fmt: skip
    args = _args(tmp_path, *options, "--dry-run", nproc=nproc, framework=framework)
    return run_cli(args, env=clean_env(env))


def plan_cpus(result: CliResult) -> List[Optional[str]]:
    assert result.code == 0, result.stderr
    return [process["cpus"] for process in json.loads(result.stdout)["processes"]]


def reported(tmp_path: Path) -> Dict[int, List[int]]:
    """rank -> the CPUs it ran on; its thread saw the same."""
    found = {}
    for path in (tmp_path / "reports").glob("worker-*.json"):
        report: Dict[str, Any] = json.loads(path.read_text())
        assert report["thread_cpus"] == report["cpus"]
        found[report["rank"]] = report["cpus"]
    return found


def summary_cpus(tmp_path: Path) -> Dict[int, Optional[str]]:
    data = read_summary(tmp_path / "logs")
    return {process["rank"]: process["cpus"] for process in data["processes"]}


def as_list(cpulist: Optional[str]) -> List[int]:
    assert cpulist is not None
    cpus: List[int] = []
    for part in cpulist.split(","):
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def warnings(result: CliResult) -> List[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("malaunch: warning:")]


def assert_ranks_ran_as_planned(tmp_path: Path, result: CliResult, expected: List[str]) -> None:
    assert result.code == 0, result.stderr
    planned = summary_cpus(tmp_path)
    assert [planned[rank] for rank in range(len(expected))] == expected
    assert reported(tmp_path) == {rank: as_list(cpus) for rank, cpus in enumerate(expected)}


# --- real ranks on this machine's CPUs ----------------------------------------------------


def test_even_ranks_run_on_the_planned_halves(tmp_path: Path) -> None:
    planned = plan_cpus(dry_run(tmp_path, "--cpu-bind", "even", nproc=2))
    assert planned == ["0", "1"]
    result = launch(tmp_path, "--cpu-bind", "even")
    assert_ranks_ran_as_planned(tmp_path, result, ["0", "1"])
    assert warnings(result) == []


def test_without_cpu_bind_ranks_keep_the_launchers_cpus(tmp_path: Path) -> None:
    result = launch(tmp_path)
    assert result.code == 0, result.stderr
    assert summary_cpus(tmp_path) == {0: None, 1: None}
    assert reported(tmp_path) == {0: [0, 1], 1: [0, 1]}


def test_a_list_from_the_variable_binds_each_local_rank(tmp_path: Path) -> None:
    result = launch(tmp_path, nproc=3, env={"MALAUNCH_CPU_BIND": "1,0,0:1"})
    assert_ranks_ran_as_planned(tmp_path, result, ["1", "0", "0-1"])


def test_numa_follows_each_gpus_node_not_the_rank_order(tmp_path: Path) -> None:
    # GPU0 sits on NUMA node 1 (CPU 1), GPU1 on node 0 (CPU 0).
    root = str(MACHINES / "two-node-gpus")
    result = launch(tmp_path, "--cpu-bind", "numa", "--sysfs-root", root)
    assert_ranks_ran_as_planned(tmp_path, result, ["1", "0"])
    assert "sysfs: the NUMA node of each rank's NVIDIA GPU" in result.stderr


def test_numa_takes_npu_smis_affinity_and_numbering(tmp_path: Path) -> None:
    # npu-smi's NPU0 is the later PCI address, on node 1.
    root = MACHINES / "two-node-npus"
    options = ("--cpu-bind", "numa", "--sysfs-root", str(root), "--npu-smi")
    result = launch(tmp_path, *options, str(root / "bin" / "npu-smi"))
    assert_ranks_ran_as_planned(tmp_path, result, ["1", "0"])
    assert "(the CPU Affinity of each rank's NPU (npu-smi info -t topo))" in result.stderr
    assert warnings(result) == []


def test_numa_without_npu_smi_takes_npus_in_pci_order_and_says_so(tmp_path: Path) -> None:
    root = str(MACHINES / "two-node-npus")
    result = launch(tmp_path, "--cpu-bind", "numa", "--sysfs-root", root)
    assert_ranks_ran_as_planned(tmp_path, result, ["0", "1"])
    assert warnings(result) == [
        "malaunch: warning: --cpu-bind numa: Ascend NPUs taken in PCI address order (no CPU "
        "affinity from npu-smi info -t topo), which npu-smi's numbering need not follow"
    ]


def test_a_launcher_on_one_cpu_shares_it_for_even(tmp_path: Path) -> None:
    result = launch(tmp_path, "--cpu-bind", "even", cpus={1})
    assert_ranks_ran_as_planned(tmp_path, result, ["1", "1"])
    assert warnings(result) == [
        "malaunch: warning: --cpu-bind even: 2 processes for 1 CPU (1): each gets one CPU, "
        "round-robin, shared with others"
    ]


def test_a_launcher_on_one_cpu_keeps_numa_within_it(tmp_path: Path) -> None:
    # GPU1's node (CPU 0) is outside the launcher's CPUs: NUMA nodes round-robin instead.
    root = str(MACHINES / "two-node-gpus")
    result = launch(tmp_path, "--cpu-bind", "numa", "--sysfs-root", root, cpus={1})
    assert_ranks_ran_as_planned(tmp_path, result, ["1", "1"])
    assert warnings(result) == [
        "malaunch: warning: --cpu-bind numa: no device locality: device 1's CPUs (0) are none "
        "of the launcher's"
    ]


def test_a_launcher_on_one_cpu_refuses_a_list_naming_another(tmp_path: Path) -> None:
    result = launch(tmp_path, "--cpu-bind", "0,1", cpus={1})
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: --cpu-bind '0,1': CPU list 1 names CPU 0, which this launcher may "
        "not use (its CPUs: 1)\n"
    )
    assert list((tmp_path / "reports").glob("*.json")) == []


def test_services_are_not_bound(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "--cpu-bind", "even", "--num-ps", "1", "--num-workers", "2",
                     framework="tensorflow_ps", nproc=2)  # fmt: skip
    roles = [(p["role"], p["cpus"]) for p in json.loads(result.stdout)["processes"]]
    assert roles == [("ps", None), ("worker", "0"), ("worker", "1")]
    result = dry_run(tmp_path, "--cpu-bind", "even", framework="mindspore", nproc=2)
    roles = [(p["role"], p["cpus"]) for p in json.loads(result.stdout)["processes"]]
    assert roles == [("scheduler", None), ("worker", "0"), ("worker", "1")]


# --- plans of 8-device servers (fixture trees; their CPUs do not exist here) ----------------


def test_numa_plan_of_a_dgx_a100_follows_nvidia_smi_topo(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "--cpu-bind", "numa", "--sysfs-root", str(DGX))
    assert plan_cpus(result) == DGX_NUMA
    assert warnings(result) == []
    assert (
        "malaunch: info: --cpu-bind numa (sysfs: the NUMA node of each rank's NVIDIA GPU, GPUs "
        "in PCI address order): rank 0: 48-63,176-191, rank 1: 48-63,176-191, rank 2: "
        "16-31,144-159, rank 3: 16-31,144-159, ... 4 more in the plan and the summary"
    ) in result.stderr.splitlines()


def test_numa_plan_follows_visible_devices(tmp_path: Path) -> None:
    # Physical GPUs 4 and 6: their nodes, 7 and 5, whatever the ranks' local numbers.
    result = dry_run(tmp_path, "--cpu-bind", "numa", "--sysfs-root", str(DGX), nproc=2,
                     env={"CUDA_VISIBLE_DEVICES": "4,6"})  # fmt: skip
    assert plan_cpus(result) == ["112-127,240-255", "80-95,208-223"]


def test_even_and_list_plans_of_a_dgx_a100(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "--cpu-bind", "even", "--sysfs-root", str(DGX))
    assert plan_cpus(result) == [f"{32 * k}-{32 * k + 31}" for k in range(8)]
    zoo = ",".join(f"{16 * k}-{16 * k + 15}:{128 + 16 * k}-{128 + 16 * k + 15}" for k in range(8))
    result = dry_run(tmp_path, "--cpu-bind", zoo, "--sysfs-root", str(DGX))
    assert plan_cpus(result) == [
        f"{16 * k}-{16 * k + 15},{128 + 16 * k}-{128 + 16 * k + 15}" for k in range(8)
    ]


def test_numa_plan_of_an_atlas_800t_a2_follows_npu_smi(tmp_path: Path) -> None:
    npu_smi = str(ATLAS / "bin" / "npu-smi")
    result = dry_run(tmp_path, "--cpu-bind", "numa", "--sysfs-root", str(ATLAS),
                     env={"MALAUNCH_NPU_SMI": npu_smi})  # fmt: skip
    assert plan_cpus(result) == ATLAS_NUMA
    assert warnings(result) == []


def test_numa_plan_of_an_atlas_800t_a2_without_npu_smi_uses_pci_order(tmp_path: Path) -> None:
    result = dry_run(tmp_path, "--cpu-bind", "numa", "--sysfs-root", str(ATLAS))
    pairs = ["0-23", "48-71", "96-119", "144-167"]  # nodes 0, 2, 4, 6, two NPUs each
    assert plan_cpus(result) == [cpus for cpus in pairs for _ in range(2)]
    assert len(warnings(result)) == 1


def test_a_container_cpuset_narrows_the_numa_plan(tmp_path: Path) -> None:
    # The launcher may use the first 64 cores only: GPUs 4-7's nodes (7, 5) are outside it.
    root = tmp_path / "dgx"
    shutil.copytree(DGX, root)
    status = root / "proc" / "self" / "status"
    status.write_text(status.read_text().replace("0-255", "0-63"))
    result = dry_run(tmp_path, "--cpu-bind", "numa", "--sysfs-root", str(root))
    nodes = ["0-15", "16-31", "32-47", "48-63"]
    assert plan_cpus(result) == nodes + nodes
    assert warnings(result) == [
        "malaunch: warning: --cpu-bind numa: no device locality: device 4's CPUs "
        "(112-127,240-255) are none of the launcher's"
    ]
    result = dry_run(tmp_path, "--cpu-bind", "even", "--sysfs-root", str(root))
    assert plan_cpus(result) == [f"{8 * k}-{8 * k + 7}" for k in range(8)]


def test_a_plan_for_cpus_this_machine_lacks_is_not_launched(tmp_path: Path) -> None:
    result = launch(tmp_path, "--cpu-bind", "numa", "--sysfs-root", str(DGX), nproc=8)
    assert result.code == 71
    assert (
        "malaunch: error: cannot start rank 0: its CPUs (48-63,176-191, --cpu-bind) are not "
        "all CPUs this launcher may use (0-1)"
    ) in result.stderr.splitlines()
    assert list((tmp_path / "reports").glob("*.json")) == []


def test_a_sysfs_tree_that_does_not_parse_falls_back_to_round_robin(tmp_path: Path) -> None:
    root = tmp_path / "dgx"
    shutil.copytree(DGX, root)
    (root / "sys" / "bus" / "pci" / "devices" / "0000:47:00.0" / "numa_node").write_text("x\n")
    result = dry_run(tmp_path, "--cpu-bind", "numa", "--sysfs-root", str(root))
    nodes = [f"{16 * n}-{16 * n + 15},{128 + 16 * n}-{128 + 16 * n + 15}" for n in range(8)]
    assert plan_cpus(result) == nodes
    bad = root / "sys" / "bus" / "pci" / "devices" / "0000:47:00.0"
    assert warnings(result) == [
        f"malaunch: warning: --cpu-bind numa: cannot read {bad}: numa_node 'x' is not a "
        "number; NUMA nodes assigned round-robin by local rank"
    ]
    (root / "sys" / "devices" / "system" / "node" / "node3" / "cpulist").write_text("48-\n")
    result = dry_run(tmp_path, "--cpu-bind", "numa", "--sysfs-root", str(root))
    assert plan_cpus(result) == ["0-255"] * 8
    assert len(warnings(result)) == 1


# --- bad input ---------------------------------------------------------------------------

HOSTILE = [
    ("0-x", "CPU list 1: '0-x' is not a CPU number or range"),
    ("0,,1", "CPU list 2: '' is not a CPU number or range"),
    ("3-1", "CPU list 1: range 3-1 ends before it starts"),
    ("0-99999", "CPU list 1: CPU 99999 is above the largest CPU number, 65535"),
    ("0, 1", "CPU list 2: ' 1' is not a CPU number or range"),
    ("1_0", "CPU list 1: '1_0' is not a CPU number or range"),
]
EXPECTED = (
    "expected none, even, numa, or a CPU list per local process such as 0-23,24-47 "
    "(0-23:48-71 joins ranges)"
)


@pytest.mark.parametrize(("value", "why"), HOSTILE, ids=[v for v, _ in HOSTILE])
def test_a_malformed_list_is_refused_in_one_line(tmp_path: Path, value: str, why: str) -> None:
    result = run_cli([*_args(tmp_path, "--cpu-bind", value)])
    assert result.code == 64
    assert result.stderr == f"malaunch: error: --cpu-bind {value!r}: {why}; {EXPECTED}\n"


def test_an_unknown_mode_names_the_variable(tmp_path: Path) -> None:
    result = run_cli(_args(tmp_path), env=clean_env({"MALAUNCH_CPU_BIND": "NUMA"}))
    assert result.code == 64
    assert result.stderr == f"malaunch: error: MALAUNCH_CPU_BIND 'NUMA': {EXPECTED}\n"


def test_a_list_shorter_than_the_processes_is_refused(tmp_path: Path) -> None:
    result = run_cli(_args(tmp_path, "--cpu-bind", "0,1", nproc=3))
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: --cpu-bind '0,1': 2 CPU lists for 3 local processes (one per "
        "process, in local order)\n"
    )


def test_a_cpu_outside_the_launchers_is_refused_before_the_topology_wait(tmp_path: Path) -> None:
    # A rank table that never appears: the refusal comes first, not after --wait-timeout.
    env = {"RANK_TABLE_FILE": str(tmp_path / "never.json")}
    args = [
        "--framework", "mindspore", "--topology", "ranktable", "--wait-timeout", "600",
        "--log-dir", str(tmp_path / "logs"), "--cpu-bind", "0,64", "--", "python", "x.py",
    ]  # fmt: skip
    result = run_cli(args, env=clean_env(env), timeout=30)
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: --cpu-bind '0,64': CPU list 2 names CPU 64, which this launcher may "
        "not use (its CPUs: 0-1)\n"
    )


def test_help_describes_the_option() -> None:
    result = run_cli(["--framework", "torch_ddp", "--help"])
    assert "--cpu-bind none|even|numa|LIST" in result.stdout
    assert "--sysfs-root DIR" in result.stdout
