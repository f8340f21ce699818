"""Property tests over the parsers of outside input (issue 13).

Each parser gets both plausible and hostile input (random text, other scripts' digits,
numbers past every bound, recursive JSON of any shape) and must either return a valid result,
checked against an invariant, or raise the project's error type (a ``MalaunchError``; for rank
specs ``UsageError``), never any other exception: the CLI turns anything else into exit 70.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from malaunch.errors import MalaunchError, TopologyError, UsageError
from malaunch.models import ResolveOptions
from malaunch.numbers import (
    MAX_DIGITS,
    MAX_LOCAL_PROCESSES,
    MAX_RANK,
    MAX_SECONDS,
    parse_int,
    parse_seconds,
)
from malaunch.rankspec import MAX_ITEMS, parse_rank_spec
from malaunch.topology import tf_config
from malaunch.topology.data import parse_data_paths
from malaunch.topology.envparse import (
    check_host,
    is_host,
    parse_host,
    parse_host_ports,
    parse_hosts,
)
from malaunch.topology.ranktable.formats import parse_table
from malaunch.topology.ranktable.read import NotReady, Ready, read_once
from malaunch.topology.ranktable.schema import Table
from malaunch.topology.slurm_hostlist import MAX_HOSTS, expand_counts, expand_hostlist

PROPERTY = settings(
    max_examples=300,
    deadline=None,
    database=None,  # no .hypothesis directory in the work tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
ARABIC = "".join(chr(0x0660 + n) for n in range(10))  # int() reads these as 0-9
HUGE = "9" * 5000  # past Python's 4,300-digit int() limit
# What a returned host may hold: no space, control character, quote or shell syntax.
HARMLESS_HOST = re.compile(r"[A-Za-z0-9._:-]+(%[A-Za-z0-9_.-]+)?", re.ASCII)

# --- strategies ---------------------------------------------------------------------------

HOSTILE_WORDS = st.sampled_from(
    [
        "", " ", "$(id)", "`id`", "a b", "a\tb", "a\x01b", "a\nb", "a;b", "-x", "a..b", "..",
        "1_0", " 7 ", "+3", "-1", "0x10", "1e400", "nan", "inf", "-inf", "NaN", "Infinity",
        HUGE, "9" * 19, ARABIC[1], ARABIC[1:3], "\u00b2", "\uff11", "\udcff", "\x00",
    ]
)  # fmt: skip
NUMBERS = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.from_regex(r"\A[0-9]{1,25}\Z"),
    st.text(alphabet="0123456789_ +-.eE", max_size=12),
    st.text(alphabet=st.characters(categories=["Nd"]), min_size=1, max_size=4),
    HOSTILE_WORDS,
    st.text(max_size=12),
)
SECONDS = st.one_of(
    st.floats().map(repr),
    st.floats().map(str),
    st.from_regex(r"\A-?[0-9]{0,9}(\.[0-9]{0,4})?([eE]-?[0-9]{1,3})?\Z"),
    NUMBERS,
)
LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 20),
    st.integers(),
    st.floats(),
    st.from_regex(r"\A[0-9]{1,3}\Z"),
    st.sampled_from(["0", "1", "2", "3", "1.0", "1.2", "completed", "192.0.2.1", "w0:1"]),
    HOSTILE_WORDS,
    st.text(max_size=6),
)
JSON = st.recursive(
    LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
IPV4 = st.ip_addresses(v=4).map(str)
IPV6 = st.ip_addresses(v=6).map(str)
NAMES = st.from_regex(r"\A[a-z0-9][a-z0-9.-]{0,20}\Z")
HOSTS = st.one_of(
    NAMES, IPV4, IPV6, IPV6.map(lambda a: f"[{a}]"), HOSTILE_WORDS, st.text(max_size=20)
)
PORTS = st.one_of(st.integers(0, 70000).map(str), NUMBERS)
HOST_PORTS = st.one_of(
    st.tuples(st.one_of(NAMES, IPV4), PORTS).map(":".join),
    st.tuples(IPV6, PORTS).map(lambda t: f"[{t[0]}]:{t[1]}"),
    HOSTS,
)


def comma_lists(items: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Comma lists as platforms write them: bare, in brackets, quoted, with spaces."""
    joined = st.lists(items, min_size=1, max_size=5).map(",".join)
    return st.one_of(
        joined,
        joined.map(lambda text: f"[{text}]"),
        joined.map(lambda text: f"'{text}'"),
        st.lists(items, min_size=1, max_size=4).map(", ".join),
        st.text(max_size=30),
    )


# --- integers, durations, rank specs ------------------------------------------------------


@PROPERTY
@given(text=NUMBERS, low=st.integers(0, 100), high=st.integers(0, 10**18), usage=st.booleans())
@example(text=HUGE, low=0, high=10**18, usage=False)
@example(text=ARABIC[1], low=0, high=10, usage=True)
def test_parse_int(text: str, low: int, high: int, usage: bool) -> None:
    error = UsageError if usage else TopologyError
    try:
        value = parse_int(text, "NAME", minimum=low, maximum=high, error=error)
    except error as exc:
        event("refused")
        assert str(exc).startswith("NAME")
        return
    assert text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS
    assert value == int(text)
    assert low <= value <= high


@PROPERTY
@given(text=SECONDS)
@example(text="nan")
@example(text="1e400")
@example(text="2200000")
def test_parse_seconds(text: str) -> None:
    try:
        value = parse_seconds(text, "--grace-period")
    except UsageError as exc:
        event("refused")
        assert str(exc).startswith("--grace-period")
        return
    assert math.isfinite(value)
    assert 0 <= value <= MAX_SECONDS
    assert text.isascii() and "_" not in text and text == text.strip()
    assert value == float(text)


RANK_ITEMS = st.one_of(
    st.integers(0, 30).map(str),
    st.tuples(st.integers(0, 2 * MAX_RANK), st.integers(0, 2 * MAX_RANK)).map(
        lambda pair: f"{pair[0]}-{pair[1]}"
    ),
    NUMBERS,
)
RANK_SPECS = st.one_of(
    st.lists(RANK_ITEMS, min_size=1, max_size=6).map(",".join),
    st.sampled_from(["all", "none", "ALL", " None ", "", ",", "0-999999999999"]),
    st.text(alphabet="0123456789,- " + ARABIC[:3], max_size=30),
    st.text(max_size=30),
)


@PROPERTY
@given(spec=RANK_SPECS)
@example(spec=",".join(["1"] * (MAX_ITEMS + 1)))
@example(spec=f"{ARABIC[1]}-{ARABIC[2]}")
def test_parse_rank_spec(spec: str) -> None:
    try:
        selection = parse_rank_spec(spec, "--console-ranks")
    except UsageError as exc:
        event("refused")
        assert str(exc).startswith("--console-ranks")
        return
    if selection.intervals is None:
        assert spec.strip().lower() == "all"
        assert 10**12 in selection
        return
    assert len(selection.intervals) <= MAX_ITEMS
    for first, last in selection.intervals:
        assert 0 <= first <= last <= MAX_RANK
        assert first in selection and last in selection
    for item in spec.split(","):
        if item.strip().isdigit():
            assert int(item) in selection


# --- host lists ---------------------------------------------------------------------------


def assert_harmless(host: str) -> None:
    """A host the launcher hands on: a name or address, nothing a shell or log could misread."""
    assert is_host(host), host
    assert HARMLESS_HOST.fullmatch(host), host


@PROPERTY
@given(host=HOSTS)
def test_check_host(host: str) -> None:
    try:
        checked = check_host(host, "MASTER_ADDR")
    except TopologyError as exc:
        event("refused")
        assert str(exc).startswith("MASTER_ADDR")
        return
    assert checked == host
    assert_harmless(checked)


@PROPERTY
@given(item=HOSTS)
def test_parse_host(item: str) -> None:
    try:
        host = parse_host(item, "MS_SCHED_HOST")
    except TopologyError as exc:
        event("refused")
        assert str(exc).startswith("MS_SCHED_HOST")
        return
    assert_harmless(host)


@PROPERTY
@given(value=comma_lists(HOSTS))
def test_parse_hosts(value: str) -> None:
    try:
        hosts = parse_hosts(value, "VC_WORKER_HOSTS")
    except TopologyError as exc:
        event("refused")
        assert str(exc).startswith("VC_WORKER_HOSTS")
        return
    assert hosts
    for host in hosts:
        assert_harmless(host)


@PROPERTY
@given(value=comma_lists(HOST_PORTS))
@example(value="[2001:db8::1]:2222, 'w0:1'")
def test_parse_host_ports(value: str) -> None:
    try:
        pairs = parse_host_ports(value, "TF_PS_HOSTS")
    except TopologyError as exc:
        event("refused")
        assert str(exc).startswith("TF_PS_HOSTS")
        return
    assert pairs
    for host, port in pairs:
        assert_harmless(host)
        assert 1 <= port <= 65535


# --- Slurm lists --------------------------------------------------------------------------

SLURM_ITEMS = st.one_of(
    st.from_regex(r"\A[a-z]{1,4}(\[[0-9]{1,3}(-[0-9]{1,6})?(,[0-9]{1,3})*\])?[a-z]{0,2}\Z"),
    st.from_regex(r"\A[a-z]{1,2}\[[0-9,\-]{0,12}\](\[[0-9,\-]{0,8}\])?\Z"),
    st.text(alphabet="n[]0123456789-, " + ARABIC[:2], max_size=16),
    HOSTILE_WORDS,
)
SLURM_LISTS = st.one_of(
    st.lists(SLURM_ITEMS, min_size=1, max_size=4).map(",".join), st.text(max_size=30)
)


@PROPERTY
@given(text=SLURM_LISTS)
@example(text="node[1-1000000]")
@example(text="a[1-1000]b[1-1000]")
@example(text=f"n[{ARABIC[1]}-{ARABIC[2]}]")
@example(text=f"n[1-{HUGE}]")
def test_expand_hostlist(text: str) -> None:
    try:
        hosts = expand_hostlist(text, "SLURM_JOB_NODELIST")
    except TopologyError as exc:
        event("refused")
        assert str(exc).startswith("SLURM_JOB_NODELIST")
        return
    assert 1 <= len(hosts) <= MAX_HOSTS
    for host in hosts:
        assert host
        assert not set(host) & set("[], \t\n")


COUNT_ITEMS = st.one_of(
    st.from_regex(r"\A[0-9]{1,6}(\(x[0-9]{1,7}\))?\Z"),
    st.text(alphabet="0123456789(x), " + ARABIC[:2], max_size=12),
    HOSTILE_WORDS,
)


@PROPERTY
@given(text=st.one_of(st.lists(COUNT_ITEMS, min_size=1, max_size=4).map(",".join), st.text()))
@example(text="1(x100000),1(x100000)")
@example(text=f"8(x{HUGE})")
def test_expand_counts(text: str) -> None:
    try:
        counts = expand_counts(text, "SLURM_TASKS_PER_NODE")
    except TopologyError as exc:
        event("refused")
        assert str(exc).startswith("SLURM_TASKS_PER_NODE")
        return
    assert 1 <= len(counts) <= MAX_HOSTS
    assert all(0 <= count <= MAX_LOCAL_PROCESSES for count in counts)


# --- TF_CONFIG and DATASET_MAP ------------------------------------------------------------

ROLES = st.one_of(st.sampled_from(["worker", "ps", "chief", "master", "evaluator"]), LEAF)
ROLE_NAMES = st.one_of(
    st.sampled_from(["worker", "ps", "chief", "master", "evaluator"]), st.text(max_size=6)
)
TASK_ADDRESSES = st.one_of(HOST_PORTS, LEAF)
ROLE_ENTRIES = st.one_of(
    st.lists(TASK_ADDRESSES, max_size=4),
    st.dictionaries(st.one_of(st.from_regex(r"\A[0-9]{1,2}\Z"), st.text(max_size=3)),
                    TASK_ADDRESSES, max_size=3),
    JSON,
)  # fmt: skip
TASKS = st.one_of(
    st.fixed_dictionaries(
        {"type": ROLES},
        optional={"index": st.one_of(st.integers(-2, 5), st.from_regex(r"\A[0-9]{1,2}\Z"), LEAF)},
    ),
    JSON,
)
TF_DOCS = st.fixed_dictionaries(
    {"cluster": st.one_of(st.dictionaries(ROLE_NAMES, ROLE_ENTRIES, max_size=4), JSON)},
    optional={"task": TASKS, "environment": st.one_of(st.just("cloud"), LEAF)},
)
TF_CONFIGS = st.one_of(
    TF_DOCS.map(json.dumps),
    JSON.map(json.dumps),
    st.integers(1, 120_000).map(lambda depth: "[" * depth),
    st.text(max_size=40),
)
GOOD_TF_CONFIG = json.dumps(
    {
        "cluster": {"worker": ["w0:1", "w1:1"], "ps": ["p0:1"]},
        "task": {"type": "worker", "index": 1},
    }
)


@PROPERTY
@given(raw=TF_CONFIGS)
@example(raw=GOOD_TF_CONFIG)
@example(raw='{"cluster": {"worker": {"3": "w3:1"}}, "task": {"type": "worker", "index": 3}}')
def test_tf_config(raw: str) -> None:
    try:
        topology = tf_config.resolve({"TF_CONFIG": raw}, ResolveOptions())
    except TopologyError as exc:
        event("refused")
        assert str(exc).startswith(("TF_CONFIG", "tf-config"))
        return
    assert 0 <= topology.node_rank < len(topology.nodes)
    assert topology.task is not None
    for node in topology.nodes:
        assert is_host(node.host), node.host
    listed = [address for addresses in topology.roles.values() for address in addresses]
    assert len(set(listed)) == len(listed)  # one TensorFlow server per host:port
    ranks = [device.rank for node in topology.nodes for device in node.devices]
    assert len(set(ranks)) == len(ranks)


DATASET_MAPS = st.one_of(
    st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=12), LEAF), max_size=4).map(
        json.dumps
    ),
    JSON.map(json.dumps),
    st.integers(1, 120_000).map(lambda depth: "{" + '"a":' * depth),
    st.text(max_size=30),
)


@PROPERTY
@given(raw=DATASET_MAPS)
@example(raw='{"incr-dataset-1": "/home/ma-user/datasets/dataset-0"}')
def test_dataset_map(raw: str) -> None:
    try:
        data = parse_data_paths({"DATASET_MAP": raw})
    except TopologyError as exc:
        event("refused")
        assert str(exc).startswith("DATASET_MAP")
        return
    for name, path in data.dataset_map.items():
        assert isinstance(name, str) and isinstance(path, str) and path.strip()


# --- rank tables --------------------------------------------------------------------------

NUMBER_LIKE = st.one_of(st.from_regex(r"\A[0-9]{1,2}\Z"), st.integers(0, 9), LEAF)
ADDRESSES = st.one_of(IPV4, IPV6, LEAF)
DEVICES = st.one_of(
    st.fixed_dictionaries(
        {"device_id": NUMBER_LIKE, "rank_id": NUMBER_LIKE},
        optional={"device_ip": ADDRESSES, "super_device_id": NUMBER_LIKE},
    ),
    JSON,
)
SERVERS = st.one_of(
    st.fixed_dictionaries(
        {"server_id": ADDRESSES, "device": st.one_of(st.lists(DEVICES, max_size=4), JSON)},
        optional={"host_ip": ADDRESSES, "container_ip": ADDRESSES},
    ),
    JSON,
)
SUPER_PODS = st.lists(
    st.fixed_dictionaries(
        {"super_pod_id": NUMBER_LIKE,
         "server_list": st.lists(st.fixed_dictionaries({"server_id": ADDRESSES}), max_size=2)}
    ),
    max_size=2,
)  # fmt: skip
TEMPLATE1 = st.fixed_dictionaries(
    {"server_list": st.one_of(st.lists(SERVERS, max_size=3), JSON)},
    optional={
        "version": st.one_of(st.sampled_from(["1.0", "1.2", "1.1", "2.0"]), LEAF),
        "server_count": NUMBER_LIKE,
        "super_pod_list": st.one_of(SUPER_PODS, JSON),
    },
)
POD_NAMES = st.one_of(st.from_regex(r"\Aw-[0-9]{1,2}\Z"), st.text(max_size=6), LEAF)
PODS = st.one_of(
    st.fixed_dictionaries(
        {
            "pod_name": POD_NAMES,
            "server_id": ADDRESSES,
            "devices": st.one_of(
                st.lists(
                    st.one_of(
                        st.fixed_dictionaries(
                            {"device_id": NUMBER_LIKE}, optional={"device_ip": ADDRESSES}
                        ),
                        JSON,
                    ),
                    max_size=3,
                ),
                JSON,
            ),
        }
    ),
    JSON,
)
GROUPS = st.one_of(
    st.fixed_dictionaries(
        {
            "group_name": st.one_of(st.sampled_from(["worker", "ps"]), LEAF),
            "device_count": NUMBER_LIKE,
            "instance_list": st.one_of(st.lists(PODS, max_size=3), JSON),
        },
        optional={"instance_count": NUMBER_LIKE},
    ),
    JSON,
)
TEMPLATE2 = st.fixed_dictionaries(
    {"group_list": st.one_of(st.lists(GROUPS, max_size=3), JSON)},
    optional={"group_count": NUMBER_LIKE, "version": LEAF},
)
TABLES = st.one_of(TEMPLATE1, TEMPLATE2, st.dictionaries(st.text(max_size=8), JSON, max_size=4))
GOOD_TABLE: Dict[str, Any] = {
    "server_list": [
        {"server_id": "192.0.2.1", "device": [
            {"device_id": "4", "device_ip": "198.51.100.1", "rank_id": "1"},
            {"device_id": "5", "device_ip": "198.51.100.2", "rank_id": "0"}]},
    ],
}  # fmt: skip


def assert_valid_table(table: Table) -> None:
    """Ranks are exactly 0..N-1; no physical device twice on one server."""
    assert table.layout in ("template 1", "template 2")
    assert table.servers
    ranks = sorted(entry.rank for server in table.servers for entry in server.devices)
    assert ranks == list(range(len(ranks)))
    on_server: Dict[str, List[int]] = {}
    for server in table.servers:
        on_server.setdefault(server.server_id, []).extend(e.device_id for e in server.devices)
    for ids in on_server.values():
        assert len(set(ids)) == len(ids)
        assert all(0 <= device_id < 10**MAX_DIGITS for device_id in ids)


@PROPERTY
@given(doc=TABLES)
@example(doc=GOOD_TABLE)
def test_parse_table(doc: Dict[str, Any]) -> None:
    try:
        table = parse_table(doc, "rank table t.json")
    except TopologyError as exc:
        event("refused")
        assert str(exc).startswith("rank table t.json")
        return
    assert_valid_table(table)


def encodings(doc: Mapping[str, Any]) -> st.SearchStrategy[bytes]:
    text = json.dumps({**doc, "status": "completed"})
    return st.sampled_from(
        [
            text.encode(),
            text.encode("utf-16"),
            b"\xef\xbb\xbf" + text.encode(),
            text.encode()[: len(text) // 2],
            text.encode().replace(b"completed", b"initializing"),
        ]
    )


FILE_BYTES = st.one_of(
    TABLES.flatmap(encodings),
    st.binary(max_size=200),
    st.integers(1, 200_000).map(lambda depth: b"[" * depth),
    st.just(b'{"status": "completed", "server_list": [{"server_id": "a", "device": [{"device_id": '
            + HUGE.encode() + b"}]}]}"),
)  # fmt: skip


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rank-tables") / "table.json"


@PROPERTY
@given(raw=FILE_BYTES)
@example(raw=json.dumps({**GOOD_TABLE, "status": "completed"}).encode())
def test_read_rank_table_file(scratch: Path, raw: bytes) -> None:
    scratch.write_bytes(raw)
    try:
        found = read_once(scratch)
        if isinstance(found, NotReady):
            assert found.kind in ("missing", "malformed", "status")
            assert found.reason
            return
        assert isinstance(found, Ready)
        assert found.data["status"] == "completed"
        table = parse_table(found.data, f"rank table {scratch}")
    except MalaunchError as exc:
        event("refused")
        assert str(exc).startswith(f"rank table {scratch}")
        return
    assert_valid_table(table)
