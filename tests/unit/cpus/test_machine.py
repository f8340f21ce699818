"""Reading a machine for ``--cpu-bind``: the fixture trees, broken ones, npu-smi."""

from __future__ import annotations

import filecmp
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from malaunch.cpus import npusmi
from malaunch.cpus.cpulist import parse_cpulist
from malaunch.cpus.machine import read_allowed, read_machine

MACHINES = Path(__file__).resolve().parents[2] / "fixtures" / "machines"
DGX = MACHINES / "dgx-a100"
ATLAS = MACHINES / "atlas-800t-a2"


def _files(folder: Path) -> List[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_the_committed_trees_are_what_the_generator_writes(tmp_path: Path) -> None:
    generator = MACHINES / "generate.py"
    subprocess.run([sys.executable, str(generator), str(tmp_path)], check=True, timeout=60)
    trees = sorted(p.name for p in tmp_path.iterdir())
    folders = sorted(p.name for p in MACHINES.iterdir() if p.is_dir() and p.name[0] != "_")
    assert trees == folders
    assert "dgx-a100" in trees and "atlas-800t-a2" in trees
    for name in trees:
        files = _files(tmp_path / name)
        assert files == _files(MACHINES / name), name
        for relative in files:
            written, committed = tmp_path / name / relative, MACHINES / name / relative
            assert filecmp.cmp(written, committed, shallow=False), relative
            executable = bool(written.stat().st_mode & stat.S_IXUSR)
            assert bool(committed.stat().st_mode & stat.S_IXUSR) == executable, relative


def test_a_dgx_a100_has_8_nodes_and_8_gpus_not_its_nvswitches() -> None:
    machine = read_machine(str(DGX), devices=True)
    assert machine.allowed == parse_cpulist("0-255")
    assert [node for node, _ in machine.nodes] == list(range(8))
    assert dict(machine.nodes)[3] == parse_cpulist("48-63,176-191")
    assert [(gpu.address[5:7], gpu.numa_node) for gpu in machine.gpus] == [
        ("07", 3), ("0f", 3), ("47", 1), ("4e", 1), ("87", 7), ("90", 7), ("b7", 5), ("bd", 5),
    ]  # fmt: skip
    assert machine.npus == () and machine.problems == ()


def test_an_atlas_800t_a2_has_8_npus_in_pci_order_not_its_network_card() -> None:
    machine = read_machine(str(ATLAS), devices=True)
    assert [npu.address for npu in machine.npus] == [
        f"0000:{bus}:00.0" for bus in ("01", "02", "41", "42", "81", "82", "c1", "c2")
    ]
    assert machine.gpus == () and machine.problems == ()


def test_the_real_root_is_the_launchers_own_affinity() -> None:
    assert read_allowed("/") == (frozenset(os.sched_getaffinity(0)), [])
    # A tree without proc/self/status describes devices, not the launcher.
    assert read_allowed(str(MACHINES / "two-node-gpus")) == (frozenset(os.sched_getaffinity(0)), [])


def test_a_broken_tree_is_a_problem_never_an_exception(tmp_path: Path) -> None:
    root = tmp_path / "dgx"
    shutil.copytree(DGX, root)
    (root / "proc" / "self" / "status").write_text("Cpus_allowed_list:\tall\n")
    (root / "sys" / "bus" / "pci" / "devices" / "0000:07:00.0" / "class").unlink()
    os.mkfifo(root / "sys" / "devices" / "system" / "node" / "node9")
    machine = read_machine(str(root), devices=True)
    assert machine.allowed == frozenset(os.sched_getaffinity(0))
    assert machine.gpus == ()  # one unreadable GPU would shift the others' numbers
    assert machine.nodes == ()
    assert len(machine.problems) == 3
    assert "'all' is not a CPU number or range" in machine.problems[0]


def test_npu_smis_table_is_read_by_row_name_and_column() -> None:
    text = (ATLAS / "bin" / "npu-smi-topo.txt").read_text()
    affinity = npusmi.parse(text)
    assert affinity[0] == parse_cpulist("144-167")
    assert affinity[5] == parse_cpulist("48-71")
    assert sorted(affinity) == list(range(8))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("This device does not support querying topo.\n", "its output has no CPU Affinity column"),
        ("     NPU0   CPU Affinity\nNPU0   X\n", "row NPU0 has no CPU Affinity value"),
        ("     NPU0   CPU Affinity\nNPU0   X   NA\n", "row NPU0: CPU Affinity 'NA' is not a CPU"),
        ("     NPU0   CPU Affinity\nLegend:\n", "its output lists no NPU"),
    ],
)
def test_npu_smi_output_that_is_not_the_table_is_refused(text: str, why: str) -> None:
    with pytest.raises(npusmi.NpuSmiError, match=why):
        npusmi.parse(text)


def _tool(tmp_path: Path, body: str) -> str:
    path = tmp_path / "npu-smi"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_npu_smi_that_fails_hangs_or_babbles_is_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(npusmi, "TIMEOUT", 0.5)
    cases = {
        "exit 3": "npu-smi info -t topo: exit code 3",
        "exec sleep 30": "npu-smi info -t topo: no answer within 0.5 s",
        "sleep 30 &\necho NPU0": "npu-smi info -t topo: no answer within 0.5 s",  # stdout held
        "exec yes": "npu-smi info -t topo: printed more than 1048576 bytes",
    }
    for body, problem in cases.items():
        assert npusmi.read_affinity(_tool(tmp_path, body), {}) == ({}, problem), body
    missing = str(tmp_path / "absent")
    assert npusmi.read_affinity(missing, {}) == (
        {},
        f"npu-smi info -t topo: cannot run {missing}: No such file or directory",
    )
    assert npusmi.read_affinity(None, {"PATH": str(tmp_path / "nowhere")}) == ({}, None)
