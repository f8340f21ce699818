"""Run a plan's ``python`` from a conda environment (SPEC §7, platform conventions §4.3).

Training containers do not start a login shell, so ``conda activate`` never runs. The platform
convention is an image-level ``ANACONDA_DIR`` + ``DEFAULT_CONDA_ENV_NAME``; ``--conda-env``
names an env (or gives its directory) explicitly. Either way every process of the plan gets
what activation would have given it: the env's interpreter for a leading ``python``, its
``bin`` first on ``PATH``, its ``lib`` first on ``LD_LIBRARY_PATH``, ``CONDA_PREFIX`` and
``CONDA_DEFAULT_ENV``. The values go into each ``ProcessSpec.env`` so ``--dry-run`` shows them.

A NAME is looked for as ``<root>/envs/NAME`` in these roots, first match wins:

1. ``$ANACONDA_DIR`` (the ModelArts / Octopus custom-image convention),
2. the installation the launcher runs under: ``$CONDA_PREFIX`` (its root when it is itself
   an ``envs/<x>`` directory), then ``$CONDA_EXE``'s installation,
3. ``$HOME/anaconda3``, ``$HOME/miniconda3``, ``$HOME/miniforge3``, ``$HOME/anaconda``,
   ``/opt/conda``.

The name ``base`` means the root itself. A value holding a ``/`` or starting with ``~`` or
``.`` is an env directory, used as is.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from malaunch.errors import MissingInputError
from malaunch.models import LaunchPlan, ProcessSpec
from malaunch.python_command import is_python
from malaunch.wording import shortened

OPTION = "--conda-env"
NAME_VAR = "DEFAULT_CONDA_ENV_NAME"
ROOT_VAR = "ANACONDA_DIR"
HOME_ROOTS = ("anaconda3", "miniconda3", "miniforge3", "anaconda")
SYSTEM_ROOTS = ("/opt/conda",)


@dataclasses.dataclass(frozen=True)
class CondaEnv:
    """A resolved env: its directory, the name conda would show, and who asked for it."""

    prefix: Path
    name: str
    origin: str


def conda_roots(environ: Mapping[str, str]) -> List[Path]:
    """The installations a NAME is looked up in, in search order, without duplicates."""
    roots: List[Path] = []
    if environ.get(ROOT_VAR):
        roots.append(Path(environ[ROOT_VAR]))
    prefix = environ.get("CONDA_PREFIX")
    if prefix:
        path = Path(prefix)
        roots.append(path.parent.parent if path.parent.name == "envs" else path)
    if environ.get("CONDA_EXE"):
        roots.append(Path(environ["CONDA_EXE"]).parent.parent)
    if environ.get("HOME"):
        roots.extend(Path(environ["HOME"]) / name for name in HOME_ROOTS)
    roots.extend(Path(root) for root in SYSTEM_ROOTS)
    unique: List[Path] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return unique


def _is_path(value: str) -> bool:
    return "/" in value or value.startswith(("~", "."))


def _as_dir(value: str, environ: Mapping[str, str]) -> Path:
    if value.startswith("~") and environ.get("HOME"):
        value = environ["HOME"] + value[1:]
    return Path(value).absolute()


def find_conda_env(environ: Mapping[str, str], conda_env: Optional[str]) -> Optional[CondaEnv]:
    """The env the launch uses, or None when neither the option nor the image names one.

    :raises MissingInputError: the named env or directory does not exist (lists the paths
        tried and where the name came from).
    """
    if conda_env:
        value, origin = conda_env, OPTION
    elif environ.get(NAME_VAR):
        value, origin = environ[NAME_VAR], NAME_VAR
    else:
        return None
    try:
        return _find(value, origin, environ)
    except OSError as exc:  # a name or path the system refuses: too long, a loop of links
        shown = shortened(value, 100, 60)
        msg = f"conda env {shown!r} (from {origin}): {exc.strerror or exc}"
        raise MissingInputError(msg) from exc


def _find(value: str, origin: str, environ: Mapping[str, str]) -> CondaEnv:
    if _is_path(value):
        prefix = _as_dir(value, environ)
        if not prefix.is_dir():
            msg = f"conda env directory {prefix} (from {origin}) does not exist"
            raise MissingInputError(msg)
        return CondaEnv(prefix, str(prefix), origin)
    tried: List[Path] = []
    for root in conda_roots(environ):
        candidate = root if value == "base" else root / "envs" / value
        if candidate.is_dir():
            return CondaEnv(candidate, value, origin)
        tried.append(candidate)
    where = ", ".join(str(path) for path in tried) or "no conda installation known"
    hint = f" (set {ROOT_VAR} or pass {OPTION} with the env's directory)"
    msg = f"conda env {value!r} (from {origin}) not found; tried {where}{hint}"
    raise MissingInputError(msg)


def _interpreter(env: CondaEnv, name: str) -> str:
    """``<env>/bin/<name>``; plain ``python``/``python3`` may use whichever of the two exists."""
    names: Tuple[str, ...] = (name,) if "." in name else (name, "python", "python3")
    bindir = env.prefix / "bin"
    for candidate in names:
        path = bindir / candidate
        if path.is_file():
            return str(path)
    tried = ", ".join(str(bindir / candidate) for candidate in dict.fromkeys(names))
    msg = (
        f"conda env {env.prefix} (from {env.origin}) has no interpreter for {name!r}: tried {tried}"
    )
    raise MissingInputError(msg)


def _prepend(entry: str, current: Optional[str]) -> str:
    """``entry`` first in a ``:`` list, once; an empty list gets no trailing ``:`` (= cwd)."""
    rest = [item for item in (current or "").split(":") if item and item != entry]
    return ":".join([entry, *rest])


def activation_env(env: CondaEnv, base: Mapping[str, str]) -> Dict[str, str]:
    """What ``conda activate`` would change, built on ``base`` (spec env over launcher env)."""
    return {
        "PATH": _prepend(str(env.prefix / "bin"), base.get("PATH")),
        "LD_LIBRARY_PATH": _prepend(str(env.prefix / "lib"), base.get("LD_LIBRARY_PATH")),
        "CONDA_PREFIX": str(env.prefix),
        "CONDA_DEFAULT_ENV": env.name,
    }


def _apply_one(spec: ProcessSpec, env: CondaEnv, environ: Mapping[str, str]) -> ProcessSpec:
    argv = list(spec.argv)
    # Only a bare interpreter name is rewritten: an absolute or relative path is the user's
    # explicit choice (and the way to opt out of an image's default env).
    if argv and "/" not in argv[0] and is_python(argv[0]):
        argv[0] = _interpreter(env, argv[0])
    merged = {**environ, **spec.env}
    new_env = {**spec.env, **activation_env(env, merged)}
    return spec.model_copy(update={"argv": tuple(argv), "env": new_env})


def apply_conda(
    plan: LaunchPlan, environ: Mapping[str, str], conda_env: Optional[str]
) -> LaunchPlan:
    """Make every process of ``plan`` run in the chosen conda env (unchanged when none).

    ``conda_env`` is the ``--conda-env`` value (a NAME or a directory); without it,
    ``DEFAULT_CONDA_ENV_NAME`` (+ ``ANACONDA_DIR``) from ``environ`` chooses the env.

    :raises MissingInputError: (exit 66) the env, or the interpreter a leading ``python``
        needs, does not exist.
    """
    env = find_conda_env(environ, conda_env)
    if env is None:
        return plan
    processes = tuple(_apply_one(spec, env, environ) for spec in plan.processes)
    return plan.model_copy(update={"processes": processes})
