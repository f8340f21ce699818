"""Which rank-table layout a completed document is, and refusing the ones we cannot launch.

Only called once the status is "completed": the initial ConfigMap holds nothing but
``{"status": "initializing"}``, so detecting the format earlier would misreport it.
"""

from __future__ import annotations

from typing import Any, Mapping

from malaunch.topology.ranktable.schema import MISSING, Table, fail, shown
from malaunch.topology.ranktable.template1 import parse_template1
from malaunch.topology.ranktable.template2 import parse_template2

SUPPORTED = "supported: 1.0, 1.2, template 2"
TEMPLATE1_VERSIONS = ("1.0", "1.2")
# Versions that exist but describe something malaunch cannot start processes from.
KNOWN_OTHERS = {
    "1.1": "the heterogeneous CPU+NPU layout with node_list",
    "2.0": "the Atlas A5 layout with rank_list",
}


def parse_table(data: Mapping[str, Any], where: str) -> Table:
    """Detect the layout of a completed rank table and validate it."""
    version = data.get("version", MISSING)
    if "server_group_list" in data:
        what = (
            "unsupported rank table format: a ClusterD global rank table (server_group_list) "
            f"is not a launch input ({SUPPORTED})"
        )
        fail(where, "", what)
    if version is not MISSING and version not in TEMPLATE1_VERSIONS:
        known = KNOWN_OTHERS.get(version) if isinstance(version, str) else None
        about = f"{known}; " if known else ""
        fail(where, "", f"unsupported rank table version {shown(version)} ({about}{SUPPORTED})")
    if "group_list" in data:
        return parse_template2(data, where)
    if "server_list" in data:
        # hand-written tables sometimes omit the version; the layout is then 1.0.
        return parse_template1(data, where, "1.0" if version is MISSING else version)
    what = (
        "unknown rank table layout: neither server_list (template 1) nor group_list "
        f"(template 2) ({SUPPORTED})"
    )
    fail(where, "", what)
