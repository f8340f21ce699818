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
import tracemalloc
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Tuple

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
from malaunch.topology import slurm, tf_config
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


def check_all(text: str) -> str:
    return check_host(text, "MASTER_ADDR")


def first_of_hosts(text: str) -> str:
    return parse_hosts(f"{text},b", "VC_WORKER_HOSTS")[0]


def first_of_host_ports(text: str) -> str:
    return parse_host_ports(f"[{text}]:22", "TF_PS_HOSTS")[0][0]


def bracketed(text: str) -> str:
    return parse_host(f"[{text}]", "MS_SCHED_HOST")


HOST_PARSERS: List[Callable[[str], str]] = [
    check_all,
    bracketed,
    first_of_hosts,
    first_of_host_ports,
]


@PROPERTY
@given(address=IPV6, zone=st.one_of(st.text(max_size=8), HOSTILE_WORDS))
@example(address="fe80::1", zone="$(id)")
@example(address="fe80::1", zone="a b")
def test_ipv6_zone_is_checked(address: str, zone: str) -> None:
    """``ipaddress`` takes any text after ``%`` as the zone: it must not carry shell syntax,
    spaces or control characters into an address."""
    for parse in HOST_PARSERS:
        try:
            host = parse(f"{address}%{zone}")
        except TopologyError:
            event("refused")
            continue
        assert_harmless(host)


@PROPERTY
@given(text=SLURM_LISTS)
@example(text="$(id),b")
@example(text="a\x01[1-2]")
def test_slurm_nodes_are_hosts(text: str) -> None:
    env = {"SLURM_JOB_NODELIST": text, "SLURM_NODEID": "0"}
    try:
        topology = slurm.resolve(env, ResolveOptions(hostnames=()))
    except TopologyError:
        event("refused")
        return
    for node in topology.nodes:
        assert_harmless(node.host)


def test_expand_hostlist_refuses_before_expanding() -> None:
    """Each bracket group is bounded, but all groups of a name are expanded before their
    product is checked: 20 groups of 99,999 cost 2 million strings (an env var of 128 KiB
    holds 14,000 groups: the launcher is killed for memory, or exits 70 on MemoryError)."""
    tracemalloc.start()
    try:
        with pytest.raises(TopologyError, match="SLURM_JOB_NODELIST"):
            expand_hostlist("n" + "[1-99999]" * 20, "SLURM_JOB_NODELIST")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak >> 20} MiB allocated to refuse the list"


LONG_NUMBER_DOCS = {
    "TF_CONFIG": [
        "{n}",
        '{{"cluster": {{"worker": ["w0:1"]}}, "task": {{"type": "worker", "index": {n}}}}}',
        '{{"cluster": {{"worker": [{n}]}}, "task": {{"type": "worker"}}}}',
    ],
    "DATASET_MAP": ["{n}", '{{"a": {n}}}'],
}


def parse_json_variable(name: str, raw: str) -> None:
    if name == "TF_CONFIG":
        tf_config.resolve({name: raw}, ResolveOptions())
    else:
        parse_data_paths({name: raw})


@PROPERTY
@given(
    digits=st.integers(4301, 6000),
    case=st.sampled_from([(n, t) for n, ts in LONG_NUMBER_DOCS.items() for t in ts]),
)
def test_json_numbers_past_the_int_limit(digits: int, case: Tuple[str, str]) -> None:
    """json.loads raises ValueError (not JSONDecodeError) for an integer of over 4,300
    digits; load_json lets it through and the CLI exits 70."""
    name, template = case
    with pytest.raises(TopologyError, match=name):
        parse_json_variable(name, template.format(n="9" * digits))


SPARSE_TWICE = json.dumps(
    {"cluster": {"worker": {"1": "w0:1", "01": "w1:1"}}, "task": {"type": "worker", "index": 1}}
)


@PROPERTY
@given(raw=TF_DOCS.map(json.dumps))
@example(raw=SPARSE_TWICE)
def test_tf_config_keeps_every_listed_task(raw: str) -> None:
    """Sparse keys "1" and "01" are one task index: the second silently replaces the first."""
    try:
        topology = tf_config.resolve({"TF_CONFIG": raw}, ResolveOptions())
    except TopologyError:
        event("refused")
        return
    cluster = json.loads(raw)["cluster"]
    listed = sum(len(entries) for entries in cluster.values())
    kept = sum(len(addresses) for addresses in topology.roles.values())
    assert kept == listed


@PROPERTY
@given(raw=st.one_of(st.text(max_size=30), JSON.map(repr), HOSTILE_WORDS))
@example(raw="{[]}")
@example(raw="-" * 100_000 + "1")
@example(raw="1" + "+1" * 30_000)
def test_dataset_path_literal(raw: str) -> None:
    """The legacy DATASET_PATH goes through ast.literal_eval, which raises TypeError (a set of
    lists), MemoryError or RecursionError (deep expressions) besides ValueError."""
    try:
        data = parse_data_paths({"DATASET_PATH": raw})
    except TopologyError:
        event("refused")
        return
    assert all(isinstance(path, str) for path in data.dataset_map.values())


@PROPERTY
@given(digits=st.integers(4301, 6000))
def test_template2_pod_index_past_the_int_limit(digits: int) -> None:
    """int() of the digits after the last "-" of pod_name raises ValueError past 4,300."""
    doc = {
        "group_list": [
            {"group_name": "worker", "device_count": "2", "instance_list": [
                {"pod_name": "w-" + "9" * digits, "server_id": "192.0.2.1",
                 "devices": [{"device_id": "0", "device_ip": "198.51.100.1"}]},
                {"pod_name": "w-0", "server_id": "192.0.2.2",
                 "devices": [{"device_id": "0", "device_ip": "198.51.100.2"}]},
            ]},
        ],
    }  # fmt: skip
    with pytest.raises(TopologyError, match="pod_name"):
        parse_table(doc, "rank table t.json")
