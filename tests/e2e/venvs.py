"""Throwaway virtualenvs for the plugin author's kit: one without pytest, one with malaunch
installed editable. Both are made with ``--without-pip`` (seconds, no download) and see the
packages of the interpreter running the tests, so nothing is fetched from an index.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from malaunch.testing import clean_env

ROOT = Path(__file__).parents[2]


def make_venv(path: Path) -> Path:
    """A virtualenv without pip and without system site-packages; returns its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return path / "bin" / "python"


def site_dir(venv: Path) -> Path:
    """The site-packages folder of ``venv`` (same Python version as the running one)."""
    purelib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    return Path(purelib)


def running_site_dirs() -> List[Path]:
    """The site-packages folders the running interpreter imports from, in sys.path order
    (its virtualenv's, and any another .pth file put on the path)."""
    found = []
    for entry in sys.path:
        path = Path(entry)
        if path.name in ("site-packages", "dist-packages") and path.is_dir():
            found.append(path)
    return list(dict.fromkeys(found))


def link_site_packages(target: Path, keep: Callable[[str], bool]) -> None:
    """Link every entry of the running interpreter's site-packages into ``target`` for which
    ``keep(name)`` holds, the first found of each name winning as on sys.path.

    A ``.pth`` file is copied without its lines that name a folder linked here (a virtualenv
    that sees another one's packages through a .pth would otherwise see all of them again).
    """
    sources = running_site_dirs()
    linked = {str(path) for path in sources}
    projects = set()  # one metadata folder per project, the first found, as imports see it
    for source in sources:
        for entry in sorted(source.iterdir()):
            if not keep(entry.name) or (target / entry.name).exists():
                continue
            if entry.suffix in (".dist-info", ".egg-info"):
                project = re.sub(r"[-_.]+", "_", entry.name.split("-", 1)[0]).lower()
                if project in projects:
                    continue
                projects.add(project)
            if entry.suffix == ".pth":
                lines = entry.read_text(encoding="utf-8").splitlines()
                kept = [line for line in lines if line.strip() not in linked]
                (target / entry.name).write_text("\n".join(kept) + "\n", encoding="utf-8")
            else:
                (target / entry.name).symlink_to(entry)


def write_console_script(venv: Path, name: str, module: str, function: str) -> Path:
    """A console script in ``venv/bin`` running ``module:function`` with the venv's python
    (what pip writes for an entry point)."""
    script = venv / "bin" / name
    script.write_text(
        f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom {module} import {function}\n"
        f"sys.exit({function}())\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def copy_project(target: Path) -> Path:
    """What an install of malaunch reads (pyproject, README, core/ with its links to the
    built-in plugins, plugins/), copied so that installing it writes nothing in the tree."""
    target.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, target / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in ("core", "plugins"):
        shutil.copytree(ROOT / folder, target / folder, symlinks=True, ignore=ignore)
    return target


def pip_install(python: Path, *args: str) -> None:
    """The running interpreter's pip installing into ``python``'s environment (pip's
    ``--python``): the new venv has no pip of its own."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=isolated_env({"PIP_DISABLE_PIP_VERSION_CHECK": "1"}),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def isolated_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """:func:`clean_env` without what would put other packages on a venv's path."""
    env = clean_env(extra)
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


def run_python(python: Path, args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = isolated_env({"PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    return subprocess.run(
        [str(python), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
