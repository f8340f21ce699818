"""The tree shows the architecture, and stays that way (docs/architecture.md).

Read from the sources with ``ast``: what plugins may import from the core, that every package
folder is installed, module sizes, import circles and lint waivers.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9 and 3.10 read the packages list with a regex below
    tomllib = None

ROOT = Path(__file__).parents[2]
CORE = ROOT / "core"
PACKAGE = CORE / "malaunch"
PLUGIN_DIRS = sorted(path for path in (ROOT / "plugins").iterdir() if path.is_dir())
EXAMPLE_PLUGINS = (
    ROOT / "examples" / "malaunch-example-plugin",
    ROOT / "examples" / "malaunch-paddle",
)
# What a plugin may import from the core (SPEC §2): the plugin API, the test kit, the runtime.
PLUGIN_MAY_IMPORT = ("malaunch.api", "malaunch.testing", "malaunch.context")
MAX_MODULE_LINES = 400
NOQA = re.compile(r"#\s*noqa\b(?P<rest>.*)$")


def _sources(*folders: Path) -> Iterator[Path]:
    for folder in folders:
        yield from sorted(p for p in folder.rglob("*.py") if "build" not in p.parts)


def _imported_modules(tree: ast.AST) -> Iterator[Tuple[int, str]]:
    """(line, module) of every import, deferred ones included; ``from a import b`` gives both
    ``a`` and ``a.b`` (b may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def _core_imports_of_code(code: str) -> List[str]:
    tree = ast.parse(code)
    found = []
    for _, module in _imported_modules(tree):
        if module == "malaunch" or module.startswith("malaunch."):
            found.append(module)
    return found


def _allowed(module: str) -> bool:
    return any(module == ok or module.startswith(ok + ".") for ok in PLUGIN_MAY_IMPORT)


def _from_lines(module: str) -> List[str]:
    """The ``from malaunch...`` lines may name a module *and* names in it: keep the module."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts) + 1)]


def _violations(code: str) -> List[str]:
    bad = []
    for module in _core_imports_of_code(code):
        # ``from malaunch.api import Topology`` also yields ``malaunch.api.Topology``: fine.
        if not any(_allowed(prefix) for prefix in _from_lines(module)) and module != "malaunch":
            bad.append(module)
    return bad


@pytest.mark.parametrize(
    "path",
    list(_sources(*PLUGIN_DIRS, *EXAMPLE_PLUGINS)),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_plugins_import_the_core_only_through_the_plugin_api(path: Path) -> None:
    assert _violations(path.read_text(encoding="utf-8")) == []


def _python_blocks(markdown: str) -> List[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


def test_plugin_docs_import_the_core_only_through_the_plugin_api() -> None:
    blocks = _python_blocks((ROOT / "docs" / "plugins.md").read_text(encoding="utf-8"))
    assert blocks
    assert [module for block in blocks for module in _violations(block)] == []


def test_the_checker_catches_an_internal_import() -> None:
    code = "from malaunch.models import Topology\nfrom malaunch.api import hookimpl\n"
    assert _violations(code) == ["malaunch.models", "malaunch.models.Topology"]


def test_the_plugin_api_exports_what_it_imports() -> None:
    from malaunch import api  # noqa: PLC0415 (the module under test)

    tree = ast.parse(Path(api.__file__).read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module != "__future__"
        for alias in node.names
    }
    assert sorted(imported) == sorted(api.__all__)
    assert all(getattr(api, name) is not None for name in api.__all__)


def _packages_in_pyproject() -> Set[str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    if tomllib is not None:
        return set(tomllib.loads(text)["tool"]["setuptools"]["packages"])
    block = text.split("packages = [", 1)[1].split("]", 1)[0]
    return set(re.findall(r'"([^"]+)"', block))


def test_the_built_in_plugins_are_reached_from_core_under_their_import_names() -> None:
    """core/ is the one package root (an editable install is then a plain path entry that
    mypy follows), so each plugins/<name> folder has a link core/malaunch_<name> to it."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^package-dir = \{ "" = "core" \}$', text, flags=re.M)
    listed = _packages_in_pyproject()
    for folder in PLUGIN_DIRS:
        link = CORE / f"malaunch_{folder.name}"
        assert link.is_symlink() and link.resolve() == folder.resolve(), link
        assert link.name in listed
    built = (".egg-info", "__pycache__")  # what a build may leave there
    assert sorted(p.name for p in CORE.iterdir() if not p.name.endswith(built)) == sorted(
        ["malaunch", *(f"malaunch_{folder.name}" for folder in PLUGIN_DIRS)]
    )


def test_every_package_folder_is_installed() -> None:
    folders = {
        ".".join(init.parent.relative_to(CORE).parts) for init in PACKAGE.rglob("__init__.py")
    }
    listed = _packages_in_pyproject()
    assert folders == {
        name for name in listed if name.startswith("malaunch.") or name == "malaunch"
    }
    stray = [p for p in PACKAGE.rglob("*.py") if not (p.parent / "__init__.py").exists()]
    assert stray == []


@pytest.mark.parametrize(
    "path",
    list(_sources(PACKAGE, *PLUGIN_DIRS, *(example / "src" for example in EXAMPLE_PLUGINS))),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{lines} lines"


def test_no_utils_module() -> None:
    assert [p for p in PACKAGE.rglob("util*.py")] == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(CORE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _core_graph() -> Dict[str, Set[str]]:
    """Module -> the core modules it imports (deferred imports included)."""
    modules = {_module_name(path): path for path in _sources(PACKAGE)}
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = {module for _, module in _imported_modules(tree) if module in modules}
        targets.discard(name)
        # A module imports its package's __init__ implicitly; that is not an arrow back up.
        graph[name] = {t for t in targets if not name.startswith(t + ".")}
    return graph


def _cycle(graph: Dict[str, Set[str]]) -> List[str]:
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_no_import_circle_in_the_core() -> None:
    assert _cycle(_core_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_lower_layers_never_import_the_cli() -> None:
    graph = _core_graph()
    up = {
        name: sorted(t for t in targets if t.startswith("malaunch.cli"))
        for name, targets in graph.items()
    }
    # ``python -m malaunch`` is the one module above the CLI.
    above = ("malaunch.cli", "malaunch.__main__")
    assert {name: t for name, t in up.items() if t and not name.startswith(above)} == {}


@pytest.mark.parametrize(
    "path",
    list(_sources(PACKAGE, *PLUGIN_DIRS, ROOT / "tests", ROOT / "benchmarks")),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_noqa_says_why(path: Path) -> None:
    unexplained = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = NOQA.search(line)
        if match and not re.match(r":\s*[A-Z]+\d+(,\s*[A-Z]+\d+)*\s+\(.+\)", match["rest"]):
            unexplained.append(f"line {number}: {line.strip()}")
    assert unexplained == []


def test_readme_layout_and_architecture_page_match_the_tree() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1]
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "docs/architecture.md" in layout
    folders = sorted(p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("__init__.py"))
    for folder in (f for f in folders if f != "."):
        assert f"{folder}/" in layout, folder
        assert f"core/malaunch/{folder}/" in architecture, folder
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("__"))
    assert [m for m in modules if f"{m}.py" not in architecture] == []
    for plugin in PLUGIN_DIRS:
        assert "plugins/<framework>/" in layout and (plugin / "plan.py").exists()
