"""docs/plugins.md documents every hook with its signature, and every field a plugin uses."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path
from typing import Callable, List, Optional, Set, Type

import click
import pytest
from pydantic import BaseModel

from malaunch import hookspecs, testing
from malaunch.models import (
    DataPaths,
    Device,
    Framework,
    Node,
    PlanOptions,
    ProcessSpec,
    ResolveOptions,
    Task,
    Topology,
    TopologySource,
)
from malaunch.plugins import load_plugins
from malaunch.testing import (
    builders,
    checks,
    commands,
    distributions,
    environment,
    fixtures,
    planning,
)

DOCS = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text(encoding="utf-8")


def _hookspecs() -> List[Callable[..., object]]:
    specs = [
        fn
        for name, fn in vars(hookspecs).items()
        if name.startswith("malaunch_") and hasattr(fn, f"{hookspecs.PROJECT}_spec")
    ]
    assert specs, "no hookspecs found"
    return specs


def signature_text(fn: Callable[..., object]) -> str:
    """``name(param: Type, ...) -> Return`` as written in source (annotations are strings)."""
    sig = inspect.signature(fn)
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"{fn.__name__}({params}) -> {sig.return_annotation}"


@pytest.mark.parametrize("spec", _hookspecs(), ids=lambda fn: fn.__name__)
def test_every_hook_is_documented_with_its_signature(spec: Callable[..., object]) -> None:
    assert f"### `{signature_text(spec)}`" in DOCS


@pytest.mark.parametrize("spec", _hookspecs(), ids=lambda fn: fn.__name__)
def test_every_hook_docstring_sentence_is_in_the_docs(spec: Callable[..., object]) -> None:
    # The first line of the docstring is the hook's summary; the docs repeat it.
    summary = (inspect.getdoc(spec) or "<no docstring>").splitlines()[0]
    assert summary.replace(":class:", "") in DOCS


@pytest.mark.parametrize("cls", [Framework, TopologySource])
def test_registration_fields_are_documented(cls: type) -> None:
    for field in dataclasses.fields(cls):
        assert f"| `{field.name}` |" in DOCS, f"{cls.__name__}.{field.name}"


@pytest.mark.parametrize("model", [PlanOptions, ProcessSpec, ResolveOptions])
def test_model_fields_are_documented(model: Type[BaseModel]) -> None:
    for name in model.model_fields:
        assert f"`{name}`" in DOCS, f"{model.__name__}.{name}"


def _functions(path: Optional[str]) -> List[str]:
    assert path is not None
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]


def _table_rows(model: str) -> List[str]:
    """The first column of the table headed ``| `Model` | meaning |``."""
    lines = DOCS.split(f"| `{model}` | meaning |\n", 1)[1].splitlines()
    rows = []
    for line in lines[1:]:  # after the |---| line
        if not line.startswith("| `"):
            break
        rows.append(line.split("`")[1])
    return rows


@pytest.mark.parametrize("model", [Topology, Node, Device], ids=lambda m: m.__name__)
def test_every_topology_field_a_plan_reads_is_in_its_table(model: Type[BaseModel]) -> None:
    properties = [name for name, value in vars(model).items() if isinstance(value, property)]
    assert sorted(_table_rows(model.__name__)) == sorted([*model.model_fields, *properties])


@pytest.mark.parametrize(
    ("field", "model"),
    [("data", DataPaths), ("task", Task)],
    ids=lambda m: getattr(m, "__name__", m),
)
def test_the_models_inside_a_topology_are_described(field: str, model: Type[BaseModel]) -> None:
    rows = _table_rows("Topology")
    assert field in rows
    row = next(line for line in DOCS.splitlines() if line.startswith(f"| `{field}` | "))
    assert [name for name in model.model_fields if f"`{name}`" not in row] == []


def test_author_kit_is_documented() -> None:
    # Read from the sources (malaunch.testing re-exports its modules' public names): pytest
    # wraps fixtures in objects that are not plain functions.
    functions: Set[str] = set()
    for module in (builders, checks, commands, distributions, environment, planning):
        functions.update(_functions(module.__file__))
    public = [name for name in testing.__all__ if name in functions]
    # The fixtures are found by pytest through the pytest11 entry point, not imported.
    public += [name for name in _functions(fixtures.__file__) if not name.startswith("_")]
    assert "make_topology" in public and "malaunch_plan" in public and "wait_gone" in public
    missing = [name for name in public if f"`{name}(" not in DOCS and f"`{name}`" not in DOCS]
    assert missing == []


def _call_text(fn: Callable[..., object]) -> str:
    """``name(a, b, *, c=1)`` as the helpers' table writes it."""
    parts: List[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind == param.KEYWORD_ONLY and "*" not in parts:
            parts.append("*")
        default = "" if param.default is param.empty else f"={param.default!r}"
        parts.append(f"{param.name}{default}")
    return f"{fn.__name__}({', '.join(parts)})"


def test_every_helper_of_the_plugin_api_is_documented_with_its_signature() -> None:
    from malaunch import api  # noqa: PLC0415 (the module under test)

    helpers = [getattr(api, name) for name in api.__all__]
    functions = [fn for fn in helpers if inspect.isfunction(fn)]
    assert len(functions) >= 15
    missing = [_call_text(fn) for fn in functions if f"| `{_call_text(fn)}` |" not in DOCS]
    assert missing == []


def test_the_plugin_api_is_documented() -> None:
    from malaunch import api  # noqa: PLC0415 (the module under test)

    missing = [name for name in api.__all__ if f"`{name}" not in DOCS]
    assert missing == []


def test_built_in_framework_options_are_documented() -> None:
    plugins = load_plugins(testing.clean_env())
    for name in ("mindspore", "tensorflow_ps", "torch_ddp"):
        assert f"### `{name}`" in DOCS
        for option in plugins.framework(name).options:
            spelled = [*option.opts, *option.secondary_opts]
            assert any(flag in DOCS for flag in spelled), f"{name}: {spelled}"


def test_every_launch_option_is_documented() -> None:
    from malaunch.cli.options import core_options  # noqa: PLC0415 (the CLI under test)

    root = Path(__file__).parents[2]
    text = "\n".join(
        path.read_text(encoding="utf-8") for path in [root / "README.md", *root.glob("docs/*.md")]
    )
    options = [param for param in core_options() if isinstance(param, click.Option)]
    undocumented = [
        option.opts[0]
        for option in options
        if not any(f"`{flag}" in text for flag in (*option.opts, *option.secondary_opts))
    ]
    assert options and undocumented == []
