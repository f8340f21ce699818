"""apply_conda on plans built in memory, against conda-layout directories built in tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

import pytest

from malaunch.errors import ExitCode, MissingInputError
from malaunch.models import Device, LaunchPlan, Node, ProcessSpec, Topology
from malaunch.process_env.conda import apply_conda, conda_roots, find_conda_env


def make_env(root: Path, name: str, interpreters: Sequence[str] = ("python", "python3")) -> Path:
    """``<root>/envs/<name>`` with bin/<interpreter> symlinks to this interpreter and a lib."""
    prefix = root / "envs" / name
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib").mkdir()
    for interpreter in interpreters:
        (prefix / "bin" / interpreter).symlink_to(sys.executable)
    return prefix


def make_plan(*argvs: Sequence[str], env: Optional[Dict[str, str]] = None) -> LaunchPlan:
    devices = tuple(Device(rank=i, local_index=i, device_id=i) for i in range(len(argvs)))
    node = Node(index=0, host="127.0.0.1", devices=devices)
    topology = Topology(source="local", nodes=(node,), node_rank=0, master_addr="127.0.0.1")
    processes = tuple(
        ProcessSpec(
            role="worker",
            rank=i,
            local_rank=i,
            argv=tuple(argv),
            env=dict(env or {}),
            cwd="/tmp",
            log_file=f"/tmp/rank{i}.log",
        )
        for i, argv in enumerate(argvs)
    )
    return LaunchPlan(framework="torch_ddp", topology=topology, processes=processes)


def test_named_env_rewrites_python_and_activates_it(tmp_path: Path) -> None:
    prefix = make_env(tmp_path / "conda", "train")
    environ = {"ANACONDA_DIR": str(tmp_path / "conda"), "PATH": "/usr/bin:/bin"}
    plan = make_plan(["python", "train.py"], ["python3", "-u", "train.py"])

    result = apply_conda(plan, environ, "train")

    first, second = result.processes
    assert first.argv == (str(prefix / "bin" / "python"), "train.py")
    assert second.argv == (str(prefix / "bin" / "python3"), "-u", "train.py")
    for spec in result.processes:
        assert spec.env["PATH"] == f"{prefix}/bin:/usr/bin:/bin"
        assert spec.env["LD_LIBRARY_PATH"] == f"{prefix}/lib"
        assert spec.env["CONDA_PREFIX"] == str(prefix)
        assert spec.env["CONDA_DEFAULT_ENV"] == "train"


def test_image_default_env_applies_without_the_option(tmp_path: Path) -> None:
    prefix = make_env(tmp_path / "anaconda3", "python-3.7.10")
    environ = {
        "ANACONDA_DIR": str(tmp_path / "anaconda3"),
        "DEFAULT_CONDA_ENV_NAME": "python-3.7.10",
        "LD_LIBRARY_PATH": "/usr/local/Ascend/driver/lib64",
    }
    result = apply_conda(make_plan(["python", "x.py"]), environ, None)
    spec = result.processes[0]
    assert spec.argv[0] == str(prefix / "bin" / "python")
    assert spec.env["LD_LIBRARY_PATH"] == f"{prefix}/lib:/usr/local/Ascend/driver/lib64"
    assert spec.env["PATH"] == f"{prefix}/bin"  # no trailing ":" (an empty entry means cwd)


def test_option_wins_over_image_default(tmp_path: Path) -> None:
    make_env(tmp_path / "conda", "default")
    chosen = make_env(tmp_path / "conda", "other")
    environ = {"ANACONDA_DIR": str(tmp_path / "conda"), "DEFAULT_CONDA_ENV_NAME": "default"}
    spec = apply_conda(make_plan(["python"]), environ, "other").processes[0]
    assert spec.env["CONDA_PREFIX"] == str(chosen)


def test_env_directory_given_as_path(tmp_path: Path) -> None:
    prefix = make_env(tmp_path, "byhand", interpreters=("python3",))
    spec = apply_conda(make_plan(["python", "t.py"]), {}, str(prefix)).processes[0]
    # Only python3 exists in this env: a bare `python` takes whichever of the two exists.
    assert spec.argv == (str(prefix / "bin" / "python3"), "t.py")
    assert spec.env["CONDA_DEFAULT_ENV"] == str(prefix)


def test_home_relative_path_uses_the_given_home(tmp_path: Path) -> None:
    prefix = make_env(tmp_path, "homeenv")
    env = find_conda_env({"HOME": str(tmp_path)}, "~/envs/homeenv")
    assert env is not None
    assert env.prefix == prefix


def test_explicit_version_needs_that_exact_interpreter(tmp_path: Path) -> None:
    prefix = make_env(tmp_path / "c", "e", interpreters=("python", "python3.11"))
    environ = {"ANACONDA_DIR": str(tmp_path / "c")}
    spec = apply_conda(make_plan(["python3.11", "a.py"]), environ, "e").processes[0]
    assert spec.argv[0] == str(prefix / "bin" / "python3.11")
    with pytest.raises(MissingInputError) as info:
        apply_conda(make_plan(["python3.9", "a.py"]), environ, "e")
    assert str(prefix / "bin" / "python3.9") in str(info.value)
    assert "--conda-env" in str(info.value)


def test_other_commands_keep_their_argv_but_get_the_env(tmp_path: Path) -> None:
    prefix = make_env(tmp_path / "c", "e")
    environ = {"ANACONDA_DIR": str(tmp_path / "c"), "PATH": "/bin"}
    plan = make_plan(["bash", "run.sh"], ["/usr/bin/python3", "a.py"], ["./python", "a.py"])
    result = apply_conda(plan, environ, "e")
    assert [spec.argv[0] for spec in result.processes] == ["bash", "/usr/bin/python3", "./python"]
    assert all(spec.env["PATH"].startswith(f"{prefix}/bin:") for spec in result.processes)


def test_interpreter_first_argv_of_a_delegate_plan_is_rewritten(tmp_path: Path) -> None:
    """A delegate-mode style argv (``python -m torch.distributed.run ...``) is rewritten too."""
    prefix = make_env(tmp_path / "c", "e")
    argv = ["python", "-m", "torch.distributed.run", "--nproc-per-node", "2", "train.py"]
    spec = apply_conda(make_plan(argv), {"ANACONDA_DIR": str(tmp_path / "c")}, "e").processes[0]
    assert spec.argv == (str(prefix / "bin" / "python"), *argv[1:])


def test_path_set_by_the_plan_is_the_base_and_not_duplicated(tmp_path: Path) -> None:
    prefix = make_env(tmp_path / "c", "e")
    plan = make_plan(["python"], env={"PATH": f"/plan/bin:{prefix}/bin", "FOO": "1"})
    environ = {"ANACONDA_DIR": str(tmp_path / "c"), "PATH": "/launcher/bin"}
    spec = apply_conda(plan, environ, "e").processes[0]
    assert spec.env["PATH"] == f"{prefix}/bin:/plan/bin"
    assert spec.env["FOO"] == "1"


def test_no_env_anywhere_leaves_the_plan_alone() -> None:
    plan = make_plan(["python", "a.py"])
    assert apply_conda(plan, {"ANACONDA_DIR": "/nonexistent"}, None) is plan


def test_missing_named_env_lists_every_path_tried(tmp_path: Path) -> None:
    environ = {"ANACONDA_DIR": str(tmp_path / "a"), "HOME": str(tmp_path / "home")}
    with pytest.raises(MissingInputError) as info:
        apply_conda(make_plan(["python"]), environ, "nope")
    message = str(info.value)
    assert info.value.exit_code == ExitCode.NO_INPUT
    assert int(info.value.exit_code) == 66
    assert str(tmp_path / "a" / "envs" / "nope") in message
    assert str(tmp_path / "home" / "miniconda3" / "envs" / "nope") in message
    assert "(from --conda-env)" in message


def test_missing_default_env_names_the_variable(tmp_path: Path) -> None:
    environ = {"ANACONDA_DIR": str(tmp_path), "DEFAULT_CONDA_ENV_NAME": "gone"}
    with pytest.raises(MissingInputError, match=r"'gone' \(from DEFAULT_CONDA_ENV_NAME\)"):
        apply_conda(make_plan(["python"]), environ, None)


def test_missing_env_directory(tmp_path: Path) -> None:
    with pytest.raises(MissingInputError, match=r"directory .*/missing \(from --conda-env\)"):
        apply_conda(make_plan(["python"]), {}, str(tmp_path / "missing"))


def test_env_without_the_interpreter(tmp_path: Path) -> None:
    prefix = make_env(tmp_path / "c", "bare", interpreters=())
    with pytest.raises(MissingInputError) as info:
        apply_conda(make_plan(["python"]), {"ANACONDA_DIR": str(tmp_path / "c")}, "bare")
    assert f"{prefix}/bin/python, {prefix}/bin/python3" in str(info.value)


def test_search_order_of_roots(tmp_path: Path) -> None:
    environ = {
        "ANACONDA_DIR": "/a",
        "CONDA_PREFIX": "/b/envs/active",
        "CONDA_EXE": "/c/bin/conda",
        "HOME": "/h",
    }
    roots = [str(root) for root in conda_roots(environ)]
    assert roots == [
        "/a",
        "/b",
        "/c",
        "/h/anaconda3",
        "/h/miniconda3",
        "/h/miniforge3",
        "/h/anaconda",
        "/opt/conda",
    ]
    # The base env as CONDA_PREFIX is itself the root.
    assert [str(r) for r in conda_roots({"CONDA_PREFIX": "/b"})] == ["/b", "/opt/conda"]


def test_first_root_holding_the_name_wins(tmp_path: Path) -> None:
    make_env(tmp_path / "home" / "miniconda3", "e")
    active = make_env(tmp_path / "active", "e")
    environ = {
        "ANACONDA_DIR": str(tmp_path / "empty"),
        "CONDA_PREFIX": str(tmp_path / "active" / "envs" / "other"),
        "HOME": str(tmp_path / "home"),
    }
    env = find_conda_env(environ, "e")
    assert env is not None
    assert env.prefix == active


def test_base_is_the_root_itself(tmp_path: Path) -> None:
    (tmp_path / "conda" / "bin").mkdir(parents=True)
    env = find_conda_env({"ANACONDA_DIR": str(tmp_path / "conda")}, "base")
    assert env is not None
    assert env.prefix == tmp_path / "conda"
