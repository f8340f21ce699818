"""The README's two commands pick their Python and refuse one that would pull a CUDA torch."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from malaunch.testing import clean_env

ROOT = Path(__file__).parents[2]


def other_python() -> str:
    for version in ("3.9", "3.10", "3.12", "3.13"):
        found = subprocess.run(
            ["bash", "-c", f"ls $(pyenv root)/versions/{version}.*/bin/python{version}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if found:
            return found[0]
    pytest.skip("no Python besides 3.11 on this machine to try the refusal with")


@pytest.mark.parametrize("script", ["scripts/test.sh", "scripts/demo.sh"])
def test_a_virtualenv_of_another_python_is_refused_before_any_install(
    tmp_path: Path, script: str
) -> None:
    python = other_python()
    env_dir = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    result = subprocess.run(
        ["bash", script, "--version"],
        cwd=ROOT,
        env=clean_env({"VENV": str(env_dir)}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert "the torch extra (torch==2.13.0, CPU) is for Python 3.11 only;" in lines[0]
    assert "pip would download a CUDA build of several GB. Use PYTHON=python3.11." in lines[1]
    assert not list(env_dir.glob("lib/python*/site-packages/malaunch"))  # nothing installed


def test_a_missing_python_is_said_plainly(tmp_path: Path) -> None:
    result = subprocess.run(
        ["bash", "-c", "source scripts/lib.sh; pick_python"],
        cwd=ROOT,
        env=clean_env({"PYTHON": str(tmp_path / "python3.11")}),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == f"==> PYTHON={tmp_path}/python3.11: not found\n"


def test_python_3_11_is_found_without_being_named() -> None:
    result = subprocess.run(
        ["bash", "-c", "source scripts/lib.sh; pick_python"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    found = result.stdout.strip()
    version = subprocess.run(
        [found, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "(3, 11)"
