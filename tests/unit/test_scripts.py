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


def ensure_venv(env_dir: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """scripts/lib.sh's ensure_venv, as both scripts call it, for the virtualenv ``env_dir``."""
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail; source scripts/lib.sh; VENV=$0; ensure_venv", env_dir],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def version_of(python: Path) -> str:
    found = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.strip()


def test_a_virtualenv_of_another_python_is_replaced_saying_so(tmp_path: Path) -> None:
    python = other_python()
    env_dir = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    old = version_of(env_dir / "bin" / "python")
    result = ensure_venv(env_dir, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith(
        f"==> {env_dir} holds Python {old}; replacing it with a Python 3.11 virtualenv ("
    )
    assert lines[1].startswith(f"==> creating the virtualenv {env_dir} with ")
    assert version_of(env_dir / "bin" / "python") == "3.11"


@pytest.mark.parametrize("script", ["scripts/test.sh", "scripts/demo.sh"])
def test_another_python_asked_for_is_refused_before_any_install(
    tmp_path: Path, script: str
) -> None:
    python = other_python()
    env_dir = tmp_path / "venv"
    result = subprocess.run(
        ["bash", script, "--version"],
        cwd=ROOT,
        env=clean_env({"VENV": str(env_dir), "PYTHON": python}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert "the torch extra (torch==2.13.0, CPU) is for Python 3.11 only;" in lines[0]
    assert "pip would download a CUDA build of several GB. Use PYTHON=python3.11." in lines[1]
    assert not env_dir.exists()  # nothing made, nothing installed


def test_a_folder_that_is_no_virtualenv_is_never_removed(tmp_path: Path) -> None:
    python = other_python()
    env_dir = tmp_path / "mine"
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / "bin" / "python").symlink_to(python)
    (env_dir / "notes.txt").write_text("keep me")
    result = ensure_venv(env_dir, timeout=60)
    assert result.returncode == 1
    old = version_of(env_dir / "bin" / "python")
    assert result.stderr.splitlines() == [
        f"==> {env_dir} is not a virtualenv made by python -m venv (no pyvenv.cfg) and holds"
        f" Python {old};",
        f"==> remove it (rm -r {env_dir}) or pick another folder with VENV=DIR,"
        " then run this again",
    ]
    assert (env_dir / "notes.txt").read_text() == "keep me"


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


@pytest.mark.parametrize("script", ["scripts/test.sh", "scripts/demo.sh"])
def test_installs_show_their_progress(script: str) -> None:
    # Minutes of downloads behind `pip -q` or an apt-get sent to /dev/null look like a hang.
    for line in (ROOT / script).read_text().splitlines():
        if "pip install" in line or "apt-get install" in line or "apt-get update" in line:
            assert " -q" not in line, line
            assert "/dev/null" not in line, line
