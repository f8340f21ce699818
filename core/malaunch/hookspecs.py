"""The hooks a malaunch plugin can implement.

Plugins are found through the ``malaunch`` entry-point group; each entry point names a module
(or object) holding functions decorated with :data:`hookimpl`. Both hooks are registration
hooks: they return named objects, and the core selects them by name, never by the order in
which pluggy calls the implementations (which is last-registered-first).
"""

from __future__ import annotations

from typing import List

import pluggy

from malaunch.models import Framework, TopologySource

PROJECT = "malaunch"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def malaunch_register_frameworks() -> List[Framework]:  # type: ignore[empty-body]
    """Return the frameworks this plugin provides.

    Called once, when the plugins are loaded, before the command line is parsed (the
    frameworks' own options become part of the launch command).

    :return: a list of :class:`malaunch.models.Framework`; an empty list is fine. Names must be
        unique across every installed plugin: a duplicate is a plugin error (exit 78) that
        names both distributions.

    Not ``firstresult``: every plugin's list is collected.
    """


@hookspec
def malaunch_register_topology_sources() -> List[TopologySource]:  # type: ignore[empty-body]
    """Return the topology sources this plugin provides.

    Called once, when the plugins are loaded. A source with a ``detect`` function takes part
    in ``--topology auto`` in ``auto_order``; any source can be chosen by name with
    ``--topology NAME``.

    :return: a list of :class:`malaunch.models.TopologySource`; names unique as for
        frameworks.

    Not ``firstresult``: every plugin's list is collected.
    """
