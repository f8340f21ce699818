"""Loading plugins from entry points, and a typed façade over what they register.

The core never imports a plugin by name: the built-in frameworks and topology sources are
declared in the ``malaunch`` entry-point group of our own ``pyproject.toml`` exactly as a
third-party package declares its own, and are loaded here like any other.
"""

from __future__ import annotations

import dataclasses
import re
from importlib import metadata
from typing import Any, Dict, Generic, Iterable, List, Mapping, Tuple, TypeVar

import pluggy

from malaunch import hookspecs
from malaunch.errors import MalaunchError, PluginError, UsageError
from malaunch.models import Framework, TopologySource
from malaunch.wording import closest

ENTRY_POINT_GROUP = "malaunch"
DISABLE_VAR = "MALAUNCH_DISABLE_PLUGINS"

T = TypeVar("T", Framework, TopologySource)


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a registered object came from, for listings and error messages."""

    plugin: str
    distribution: str
    version: str

    def describe(self) -> str:
        return f"plugin {self.plugin!r} of distribution {self.distribution} {self.version}"


@dataclasses.dataclass(frozen=True)
class Registered(Generic[T]):
    item: T
    origin: Origin


@dataclasses.dataclass(frozen=True)
class PluginSet:
    """Everything the installed plugins registered, selected by name."""

    frameworks: Mapping[str, Registered[Framework]]
    sources: Mapping[str, Registered[TopologySource]]
    hooks: Mapping[str, Tuple[str, ...]]

    def framework(self, name: str) -> Framework:
        """The framework ``name``; see :func:`unknown_name` for a name not installed."""
        if name not in self.frameworks:
            raise unknown_name("framework", name, sorted(self.frameworks))
        return self.frameworks[name].item

    def source(self, name: str) -> TopologySource:
        """The topology source ``name``; see :func:`unknown_name` for a name not installed."""
        if name not in self.sources:
            raise unknown_name("topology source", name, sorted(self.sources), auto=True)
        return self.sources[name].item

    def launcher_vars(self) -> List[Tuple[str, str]]:
        """(variable, who sets it) for every variable a framework declares as its launcher's,
        in framework name order (never load order), for the nested-launch refusal."""
        return [
            (variable, registered.item.launched_by())
            for _, registered in sorted(self.frameworks.items())
            for variable in registered.item.launcher_vars
        ]

    def owned_env(self) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
        """(prefixes, names) of the variables the frameworks declare as their own."""
        items = [r.item for _, r in sorted(self.frameworks.items())]
        prefixes = [p for item in items for p in item.env_prefixes]
        names = [name for item in items for name in item.launcher_vars]
        return tuple(dict.fromkeys(prefixes)), tuple(dict.fromkeys(names))

    def auto_sources(self) -> List[TopologySource]:
        """Sources that take part in ``--topology auto``, in the order they are tried."""
        found = [r.item for r in self.sources.values() if r.item.detect is not None]
        return sorted(found, key=lambda s: (s.auto_order, s.name))


def unknown_name(kind: str, name: str, installed: List[str], auto: bool = False) -> MalaunchError:
    """A name close to an installed one (or to ``auto``) is a typo: a usage error (64) naming
    that one. Any other is a plugin that is not installed (78), the installed names listed."""
    meant = closest(name, [*installed, *(["auto"] if auto else [])])
    if meant is not None:
        msg = f"unknown {kind} {name!r} (did you mean {meant}?); see `malaunch plugins`"
        return UsageError(msg)
    listed = (", ".join(installed) or "none") + (", or auto" if auto else "")
    return PluginError(f"unknown {kind} {name!r} (installed: {listed}); see `malaunch plugins`")


def _entry_points() -> List[Tuple[metadata.EntryPoint, Origin]]:
    """Every entry point of the group, with the distribution that declares it.

    Only distributions that declare the group have their metadata read: parsing every
    installed package's METADATA costs tens of milliseconds in a training image. A
    distribution found twice on sys.path (an installed copy next to a source tree) counts once,
    the first found, as ``metadata.entry_points()`` does on 3.10+.
    """
    found: List[Tuple[metadata.EntryPoint, Origin]] = []
    seen = set()
    for dist in metadata.distributions():
        # Python 3.9's entry points do not know their distribution, hence this walk.
        mine = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
        if not mine:
            continue
        name = dist.metadata["Name"] or "unknown"
        key = re.sub(r"[-_.]+", "-", name).lower()  # PEP 503 normalisation
        if key in seen:
            continue
        seen.add(key)
        found.extend((ep, Origin(ep.name, name, dist.version)) for ep in mine)
    return found


def _disabled(environ: Mapping[str, str]) -> set[str]:
    raw = environ.get(DISABLE_VAR, "")
    return {name.strip() for name in raw.split(",") if name.strip()}


# What a plugin's code may raise that is a plugin error (78), not the launcher's: any
# exception, a ``sys.exit`` (whose number would pass for a rank's exit code, or for success),
# and a ``KeyboardInterrupt`` it raises itself (the launcher's stopping signals raise
# ``malaunch.stopping.Stopped``, which passes).
PLUGIN_FAILURES = (Exception, SystemExit, KeyboardInterrupt)
MAX_SHOWN = 200  # characters of a plugin's own message in the one line


def failure_text(exc: BaseException) -> str:
    """What a plugin raised, for the one error line: ``it called sys.exit(0)``,
    ``ImportError: needs libfoo`` (whitespace folded, at most :data:`MAX_SHOWN` characters)."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    text = " ".join(str(exc).split())
    if len(text) > MAX_SHOWN:
        text = text[:MAX_SHOWN] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _load_one(pm: pluggy.PluginManager, ep: metadata.EntryPoint, origin: Origin) -> None:
    try:
        module = ep.load()
    except PLUGIN_FAILURES as exc:
        msg = f"cannot load {origin.describe()} ({ep.value}): {failure_text(exc)}"
        raise PluginError(msg) from exc
    _register(pm, module, origin)


def _one_line(exc: Exception) -> str:
    """pluggy's validation messages span lines; the launcher reports errors on one."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def _register(pm: pluggy.PluginManager, plugin: object, origin: Origin) -> None:
    try:
        pm.register(plugin, name=origin.plugin)
    except (pluggy.PluginValidationError, ValueError) as exc:
        msg = f"{origin.describe()} has a bad hook: {_one_line(exc)}"
        raise PluginError(msg) from exc


def _seen_before(origins: Mapping[str, Origin], origin: Origin) -> bool:
    """True for the same distribution found twice on sys.path; an error for two of them."""
    other = origins.get(origin.plugin)
    if other is None:
        return False
    if other.distribution == origin.distribution:
        return True
    msg = (
        f"plugin name {origin.plugin!r} (entry point group {ENTRY_POINT_GROUP!r}) is declared "
        f"twice: by distribution {other.distribution} {other.version} and by distribution "
        f"{origin.distribution} {origin.version}"
    )
    raise PluginError(msg)


def _collect(
    pm: pluggy.PluginManager, hook_name: str, origins: Mapping[str, Origin], cls: type
) -> Dict[str, Registered[Any]]:
    """Call one registration hook plugin by plugin, so each result keeps its origin."""
    kind = "framework" if cls is Framework else "topology source"
    found: Dict[str, Registered[Any]] = {}
    caller = getattr(pm.hook, hook_name)
    for impl in caller.get_hookimpls():
        origin = origins[impl.plugin_name]
        try:
            items = impl.function()
        except PLUGIN_FAILURES as exc:
            msg = f"{origin.describe()} failed in {hook_name}: {failure_text(exc)}"
            raise PluginError(msg) from exc
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, cls) for i in items):
            msg = f"{origin.describe()}: {hook_name} must return a list of {cls.__name__}"
            raise PluginError(msg)
        for item in items:
            name = item.name
            if not isinstance(name, str) or not name:
                msg = f"{origin.describe()} returned a {kind} without a name from {hook_name}"
                raise PluginError(msg)
            if isinstance(item, Framework):
                _check_declared_env(item, origin)
            if name in found:
                other = found[name].origin
                msg = (
                    f"{kind} {name!r} is registered twice: by {other.describe()} "
                    f"and by {origin.describe()}"
                )
                raise PluginError(msg)
            found[name] = Registered(item, origin)
    return found


VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_declared_env(framework: Framework, origin: Origin) -> None:
    """``launcher_vars`` and ``env_prefixes`` are lists of variable names (a prefix is the
    start of one): a plain string would be taken letter by letter, an empty prefix would match
    every variable."""
    for field in ("launcher_vars", "env_prefixes"):
        value = getattr(framework, field)
        ok = isinstance(value, (list, tuple)) and all(
            isinstance(v, str) and VARIABLE.fullmatch(v) for v in value
        )
        if not ok:
            msg = (
                f"{origin.describe()}: framework {framework.name!r} has "
                f"{field}={repr(value)[:100]}; expected a list of variable names"
            )
            raise PluginError(msg)
    if not isinstance(framework.launcher, str):
        msg = f"{origin.describe()}: framework {framework.name!r}: launcher must be a str"
        raise PluginError(msg)


def load_plugins(
    environ: Mapping[str, str], extra: Iterable[Tuple[object, Origin]] = ()
) -> PluginSet:
    """Load every enabled entry point of the ``malaunch`` group and collect registrations.

    ``extra`` registers already-imported plugin objects (tests use it); ``MALAUNCH_DISABLE_PLUGINS``
    (comma-separated entry-point names) skips plugins without importing them.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    disabled = _disabled(environ)
    origins: Dict[str, Origin] = {}
    for ep, origin in _entry_points():
        if ep.name in disabled:
            continue
        if _seen_before(origins, origin):
            continue
        origins[ep.name] = origin
        _load_one(pm, ep, origin)
    for obj, origin in extra:
        _seen_before(origins, origin)
        origins[origin.plugin] = origin
        _register(pm, obj, origin)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        plugin_name = pm.get_name(exc.plugin) or "?"
        culprit = origins.get(plugin_name, Origin(plugin_name, "unknown", "?"))
        msg = f"{culprit.describe()} implements an unknown hook: {_one_line(exc)}"
        raise PluginError(msg) from exc
    hooks: Dict[str, List[str]] = {}
    for name, plugin in pm.list_name_plugin():
        hooks[name] = sorted(impl.name for impl in _impls_of(pm, plugin))
    return PluginSet(
        frameworks=_collect(pm, "malaunch_register_frameworks", origins, Framework),
        sources=_collect(pm, "malaunch_register_topology_sources", origins, TopologySource),
        hooks={name: tuple(names) for name, names in hooks.items()},
    )


def _impls_of(pm: pluggy.PluginManager, plugin: object) -> List[Any]:
    return list(pm.get_hookcallers(plugin) or [])


__all__ = ["Origin", "PluginSet", "Registered", "load_plugins"]
