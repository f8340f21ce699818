"""Loading plugins from the ``malaunch`` entry-point group, and what a broken one gives."""

from __future__ import annotations

import ast
import sys
from importlib import metadata
from pathlib import Path
from typing import Iterator, List

import pytest

import malaunch
from malaunch.errors import ExitCode, PluginError
from malaunch.hookspecs import hookimpl
from malaunch.models import Framework, LaunchPlan, TopologySource
from malaunch.plugins import ENTRY_POINT_GROUP, Origin, load_plugins
from malaunch.testing import clean_env, write_fake_distribution

BUILTIN_FRAMEWORKS = {"mindspore", "tensorflow_ps", "torch_ddp"}
BUILTIN_SOURCES = {"local", "tf-ps", "tf-config", "volcano"}
CORE = Path(malaunch.__file__).parent


def _no_plan(*_args: object) -> LaunchPlan:
    raise AssertionError("not called")


class FakePlugin:
    """A plugin object registering one framework (for ``load_plugins(extra=...)``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def malaunch_register_frameworks(self) -> List[Framework]:
        return [Framework(name=self.name, plan=_no_plan)]


def _extra(plugin: object, dist: str = "malaunch-fake") -> list[tuple[object, Origin]]:
    return [(plugin, Origin("fake", dist, "9.9"))]


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A sys.path entry for fake distributions; their modules are forgotten afterwards."""
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    before = set(sys.modules)
    yield directory
    for name in set(sys.modules) - before:
        if name.startswith("fake_"):
            del sys.modules[name]


def test_builtins_come_from_our_own_entry_points() -> None:
    plugins = load_plugins(clean_env())
    assert set(plugins.frameworks) >= BUILTIN_FRAMEWORKS
    assert set(plugins.sources) >= BUILTIN_SOURCES
    for name in BUILTIN_FRAMEWORKS:
        origin = plugins.frameworks[name].origin
        assert (origin.plugin, origin.distribution, origin.version) == (
            name, "malaunch", malaunch.__version__,
        )  # fmt: skip
        assert plugins.hooks[name] == ("malaunch_register_frameworks",)
    for name in BUILTIN_SOURCES:
        assert plugins.sources[name].origin.plugin == "sources"
    declared = {
        ep.name: ep.value
        for ep in metadata.distribution("malaunch").entry_points
        if ep.group == ENTRY_POINT_GROUP
    }
    assert declared == {
        "sources": "malaunch.topology.builtin",
        "mindspore": "malaunch_mindspore",
        "tensorflow_ps": "malaunch_tensorflow_ps",
        "torch_ddp": "malaunch_torch_ddp",
    }


def test_core_never_imports_a_plugin() -> None:
    plugin_packages = {"malaunch_mindspore", "malaunch_tensorflow_ps", "malaunch_torch_ddp"}
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in plugin_packages]
    assert offenders == []


def test_plugins_can_be_disabled_by_name() -> None:
    plugins = load_plugins({"MALAUNCH_DISABLE_PLUGINS": " torch_ddp, mindspore ,"})
    assert "tensorflow_ps" in plugins.frameworks
    assert not {"torch_ddp", "mindspore"} & set(plugins.frameworks)
    with pytest.raises(PluginError, match=r"unknown framework 'torch_ddp' \(installed: .*"):
        plugins.framework("torch_ddp")


def test_sources_for_auto_are_ordered_with_local_last() -> None:
    names = [s.name for s in load_plugins(clean_env()).auto_sources()]
    assert names.index("tf-ps") < names.index("tf-config") < names.index("volcano")
    assert names[-1] == "local"


def test_duplicate_framework_names_both_distributions() -> None:
    with pytest.raises(PluginError) as info:
        load_plugins(clean_env(), extra=_extra(FakePlugin("torch_ddp")))
    message = str(info.value)
    assert "framework 'torch_ddp' is registered twice" in message
    assert "distribution malaunch 0.1.0" in message
    assert "distribution malaunch-fake 9.9" in message
    assert info.value.exit_code == ExitCode.CONFIG
    assert int(ExitCode.CONFIG) == 78


def test_a_third_party_framework_is_registered_with_its_origin() -> None:
    plugins = load_plugins(clean_env(), extra=_extra(FakePlugin("echo_fake")))
    registered = plugins.frameworks["echo_fake"]
    assert registered.origin == Origin("fake", "malaunch-fake", "9.9")
    assert plugins.hooks["fake"] == ("malaunch_register_frameworks",)


def test_same_entry_point_name_in_two_distributions(on_path: Path) -> None:
    write_fake_distribution(
        on_path, "malaunch-shadow", "0.2", {"torch_ddp": "fake_shadow"},
        {"fake_shadow": ""},
    )  # fmt: skip
    with pytest.raises(PluginError) as info:
        load_plugins(clean_env())
    message = str(info.value)
    assert "plugin name 'torch_ddp'" in message
    assert "malaunch 0.1.0" in message and "malaunch-shadow 0.2" in message


def test_import_error_names_the_distribution(on_path: Path) -> None:
    write_fake_distribution(
        on_path, "malaunch-broken", "0.3", {"broken": "fake_broken"},
        {"fake_broken": "import fake_module_that_does_not_exist\n"},
    )  # fmt: skip
    with pytest.raises(PluginError, match=r"cannot load plugin 'broken' of distribution "
                       r"malaunch-broken 0.3 \(fake_broken\): ModuleNotFoundError"):  # fmt: skip
        load_plugins(clean_env())
    # A disabled plugin is not even imported.
    plugins = load_plugins({"MALAUNCH_DISABLE_PLUGINS": "broken"})
    assert "fake_broken" not in sys.modules
    assert set(plugins.frameworks) >= BUILTIN_FRAMEWORKS


class BadSignature:
    @hookimpl
    def malaunch_register_frameworks(self, unexpected: int) -> List[Framework]:
        return []


class UnknownHook:
    @hookimpl
    def malaunch_register_everything(self) -> List[Framework]:
        return []


class Raises:
    @hookimpl
    def malaunch_register_topology_sources(self) -> List[TopologySource]:
        raise RuntimeError("boom")


class WrongType:
    @hookimpl
    def malaunch_register_topology_sources(self) -> List[Framework]:
        return [Framework(name="x", plan=_no_plan)]


class NoName:
    @hookimpl
    def malaunch_register_frameworks(self) -> List[Framework]:
        return [Framework(name="", plan=_no_plan)]


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        (BadSignature(), r"malaunch-fake 9.9 has a bad hook: .*unexpected"),
        (UnknownHook(), r"malaunch-fake 9.9 implements an unknown hook: .*everything"),
        (Raises(), r"failed in malaunch_register_topology_sources: RuntimeError: boom"),
        (WrongType(), r"malaunch_register_topology_sources must return a list of TopologySource"),
        (NoName(), r"returned a framework without a name"),
    ],
)
def test_broken_hooks_are_plugin_errors(plugin: object, expected: str) -> None:
    with pytest.raises(PluginError, match=expected) as info:
        load_plugins(clean_env(), extra=_extra(plugin))
    assert "plugin 'fake' of distribution malaunch-fake 9.9" in str(info.value)


class DeclaringPlugin:
    """A framework that declares its launcher's variables and the prefixes it owns."""

    def __init__(self, name: str, **declared: object) -> None:
        self.name = name
        self.declared = declared

    @hookimpl
    def malaunch_register_frameworks(self) -> List[Framework]:
        return [Framework(name=self.name, plan=_no_plan, **self.declared)]  # type: ignore[arg-type]


def test_declared_launcher_variables_and_prefixes_are_collected_by_name() -> None:
    other = DeclaringPlugin(
        "other",
        launcher="other.launch",
        launcher_vars=["OTHER_TRAINER_ID", "GROUP_RANK"],
        env_prefixes=["OTHER_"],
    )
    plugins = load_plugins(clean_env(), extra=_extra(other))
    shown = ("mindspore", "other", "torch_ddp")  # other installed plugins may declare theirs
    declared = [
        (name, who)
        for name, who in plugins.launcher_vars()
        if who.endswith(tuple(f"(framework {framework})" for framework in shown))
    ]
    # In framework name order: mindspore, other, torch_ddp (never the order of loading).
    assert declared == [
        ("MS_NODE_ID", "msrun worker (framework mindspore)"),
        ("OTHER_TRAINER_ID", "other.launch worker (framework other)"),
        ("GROUP_RANK", "other.launch worker (framework other)"),
        ("TORCHELASTIC_RUN_ID", "torchrun worker (framework torch_ddp)"),
        ("GROUP_RANK", "torchrun worker (framework torch_ddp)"),
    ]
    prefixes, names = plugins.owned_env()
    assert {"MS_", "OTHER_", "TF_", "TORCHELASTIC_"} <= set(prefixes)
    assert names.count("GROUP_RANK") == 1
    assert {"MS_NODE_ID", "OTHER_TRAINER_ID", "TORCHELASTIC_RUN_ID"} <= set(names)


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (
            {"launcher_vars": "PADDLE_TRAINER_ID"},
            "launcher_vars='PADDLE_TRAINER_ID'; expected a list of variable names",
        ),
        ({"env_prefixes": [""]}, "env_prefixes=['']; expected a list of variable names"),
        ({"env_prefixes": ["PADDLE-"]}, "env_prefixes=['PADDLE-']; expected a list of"),
        ({"launcher_vars": [1]}, "launcher_vars=[1]; expected a list of variable names"),
        ({"launcher": None}, "framework 'decl': launcher must be a str"),
    ],
)
def test_bad_declarations_are_plugin_errors(declared: dict[str, object], expected: str) -> None:
    with pytest.raises(PluginError) as info:
        load_plugins(clean_env(), extra=_extra(DeclaringPlugin("decl", **declared)))
    assert str(info.value).startswith("plugin 'fake' of distribution malaunch-fake 9.9: ")
    assert expected in str(info.value)
    assert info.value.exit_code == ExitCode.CONFIG
