"""The plugin author's kit installs and imports as the docs say (docs/plugins.md §6).

- ``malaunch.testing``'s helpers work where pytest is not installed: a virtualenv that sees
  every package of this one but pytest;
- ``pip install 'malaunch[testing]'`` brings pytest, and the example plugin's test extra
  names that extra.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
import venvs

NO_PYTEST = textwrap.dedent(
    """\
    import importlib.util, json, sys
    from pathlib import Path

    assert importlib.util.find_spec("pytest") is None, "pytest is importable here"
    from malaunch.testing import clean_env, make_plan, make_topology, run_cli

    plan = make_plan("torch_ddp", make_topology(nodes=2, nproc_per_node=2, node_rank=1),
                     log_dir=Path.cwd() / "logs")
    listed = run_cli(["plugins", "--json"], env=clean_env())
    print(json.dumps({
        "ranks": [p.rank for p in plan.processes],
        "code": listed.code,
        "frameworks": sorted(r["name"] for r in json.loads(listed.stdout)
                             if r["kind"] == "framework"),
        "pytest_loaded": sorted(m for m in sys.modules if "pytest" in m),
    }))
    """
)


def _not_pytest(name: str) -> bool:
    lowered = name.lower()
    return not lowered.startswith(("pytest", "_pytest")) and lowered != "py.py"


def test_the_kit_works_where_pytest_is_not_installed(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    python = venvs.make_venv(venv)
    venvs.link_site_packages(venvs.site_dir(venv), keep=_not_pytest)
    venvs.write_console_script(venv, "malaunch", "malaunch.cli.main", "console_main")
    proc = venvs.run_python(python, ["-c", NO_PYTEST], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["ranks"] == [2, 3]
    assert seen["code"] == 0
    assert {"mindspore", "tensorflow_ps", "torch_ddp"} <= set(seen["frameworks"])
    assert seen["pytest_loaded"] == []


def _requirements(distribution: str) -> list[str]:
    return [re.sub(r"\s+", "", req) for req in metadata.requires(distribution) or []]


def test_the_testing_extra_brings_pytest() -> None:
    assert 'pytest>=7.4;extra=="testing"' in _requirements("malaunch")


def test_the_example_plugin_tests_with_the_testing_extra() -> None:
    assert 'malaunch[testing];extra=="test"' in _requirements("malaunch-example-plugin")


def _not_malaunch(name: str) -> bool:
    """Everything but malaunch and its plugins as installed here (the venv gets its own)."""
    lowered = name.lower().replace("-", "_")
    return not lowered.startswith(("malaunch", "__editable__"))


EXAMPLES = {
    "malaunch-example-plugin": "malaunch_example_plugin",
    "malaunch-paddle": "malaunch_paddle",
}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_a_plugin_type_checks_against_an_editable_install(tmp_path: Path, example: str) -> None:
    """``mypy --strict`` finds ``malaunch.api`` where malaunch is installed with ``pip install
    -e`` (setuptools' import-hook finder hid it, and mypy reported import-not-found)."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed here (the dev extra brings it)")
    project = venvs.copy_project(tmp_path / "malaunch")
    venv = tmp_path / "venv"
    python = venvs.make_venv(venv)
    venvs.link_site_packages(venvs.site_dir(venv), keep=_not_malaunch)
    venvs.pip_install(python, "--no-deps", "--no-build-isolation", "-e", str(project))
    builtins = "import malaunch.api, malaunch_mindspore, malaunch_tensorflow_ps, malaunch_torch_ddp"
    imported = venvs.run_python(python, ["-c", builtins], cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    sources = venvs.ROOT / "examples" / example / "src" / EXAMPLES[example]
    args = ["--strict", "--python-executable", str(python), "--cache-dir", str(tmp_path / "c")]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", *args, str(sources)],
        cwd=tmp_path,  # no configuration file of ours: what an author's own project sees
        capture_output=True,
        text=True,
        timeout=600,
        env=venvs.isolated_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Success: no issues found in")
