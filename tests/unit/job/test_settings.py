"""What every node derives alike: the job port, and whether and how the channel runs."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from malaunch.errors import UsageError
from malaunch.job.protocol import derive_token
from malaunch.job.settings import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    JobSettings,
    job_identity,
    job_port,
    job_settings,
)
from malaunch.models import Topology
from malaunch.testing import make_topology


def settings_of(topology: Topology, **options: Any) -> Optional[JobSettings]:
    kwargs: Any = {
        "requested_port": None,
        "secret": "",
        "heartbeat_timeout": DEFAULT_HEARTBEAT_TIMEOUT,
        "wait_timeout": 600.0,
        **options,
    }
    return job_settings(topology, **kwargs)


# -- job_port -----------------------------------------------------------------------------


def test_explicit_port_wins() -> None:
    assert job_port(make_topology(nodes=2, master_port=29500), 4242) == 4242
    # Even where master port + 1 would not fit.
    assert job_port(make_topology(nodes=2, master_port=65535), 4242) == 4242


def test_master_port_plus_one() -> None:
    assert job_port(make_topology(nodes=2, master_port=29500), None) == 29501
    assert job_port(make_topology(nodes=3, master_port=65534), None) == 65535


def test_master_port_65535_leaves_no_room() -> None:
    with pytest.raises(UsageError) as caught:
        job_port(make_topology(nodes=2, master_port=65535), None)
    assert str(caught.value) == (
        "master port 65535 leaves no room for the job port (master port + 1): give --job-port"
    )


def test_hashed_port_is_in_range_and_stable() -> None:
    ports = set()
    for nodes in range(2, 12):
        for job_id in (None, "job-a", "job-b"):
            first = job_port(make_topology(nodes=nodes, job_id=job_id), None)
            again = job_port(make_topology(nodes=nodes, job_id=job_id), None)
            assert first == again
            assert 20000 <= first <= 29999
            ports.add(first)
    assert len(ports) > 1  # the port depends on the job


def test_hashed_port_is_the_same_from_every_node() -> None:
    ports = {job_port(make_topology(nodes=4, node_rank=r, job_id="j"), None) for r in range(4)}
    assert len(ports) == 1


def test_hashed_port_differs_between_jobs() -> None:
    one = job_port(make_topology(nodes=2, job_id="job-a"), None)
    other = job_port(make_topology(nodes=2, job_id="job-b"), None)
    assert one != other


# -- job_settings -------------------------------------------------------------------------


def test_no_channel_for_one_node() -> None:
    assert settings_of(make_topology(nodes=1, master_port=29500)) is None


def test_job_identity_is_what_every_node_reads_alike() -> None:
    topology = make_topology(nodes=3, nproc_per_node=4, master_port=29500, job_id="j")
    assert job_identity(topology) == ["j", 3, 12, 29500, None]
    # Without a job id, the rendezvous address stands in for it.
    anonymous = make_topology(nodes=2, master_port=29500)
    assert job_identity(anonymous) == [None, 2, 4, 29500, "192.0.2.11"]


def test_placeholder_hosts_do_not_change_the_token() -> None:
    """Pods that know only the master's address name the others with placeholders that differ
    from pod to pod (kubeflow-node-1 here, this pod's own name there): the token and the port
    must not depend on them."""
    found = set()
    for rank in range(3):
        topology = make_topology(nodes=3, node_rank=rank, job_id="j")
        hosts = ["192.0.2.11"] + [
            f"pod-{rank}" if i == rank else f"kubeflow-node-{i}" for i in (1, 2)
        ]
        nodes = tuple(n.model_copy(update={"host": h}) for n, h in zip(topology.nodes, hosts))
        topology = topology.model_copy(update={"nodes": nodes})
        settings = settings_of(topology)
        assert settings is not None
        assert settings.host == "192.0.2.11"
        found.add((settings.port, settings.token))
    assert len(found) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"job_id": "k"},
        {"master_port": 29600},
        {"nodes": 4},
        {"nproc_per_node": 3},
    ],
)
def test_another_job_shape_gives_another_token(change: Dict[str, Any]) -> None:
    base: Dict[str, Any] = {"nodes": 3, "nproc_per_node": 2, "master_port": 29500, "job_id": "j"}
    one = settings_of(make_topology(**base), requested_port=31000)
    other = settings_of(make_topology(**{**base, **change}), requested_port=31000)
    assert one is not None and other is not None
    assert one.token != other.token


def test_no_channel_where_peers_cannot_reach_node_0() -> None:
    assert settings_of(make_topology(nodes=2, peers_reachable=False)) is None


def test_no_channel_when_switched_off() -> None:
    assert settings_of(make_topology(nodes=2), enabled=False) is None


def test_settings_of_a_node() -> None:
    topology = make_topology(nodes=3, node_rank=2, master_port=29500, job_id="j")
    settings = settings_of(topology, heartbeat_timeout=2.0, wait_timeout=30.0)
    assert settings is not None
    assert settings == JobSettings(
        node_rank=2,
        nnodes=3,
        host="192.0.2.11",
        port=29501,
        token=derive_token(["j", 3, 6, 29500, None], 29501, ""),
        heartbeat_timeout=2.0,
        wait_timeout=30.0,
        own_host="192.0.2.13",  # its hello says it: a replacement's address may be new
    )
    assert not settings.serves
    assert settings.heartbeat_interval == pytest.approx(0.4)


def test_node_0_serves() -> None:
    settings = settings_of(make_topology(nodes=2, node_rank=0), heartbeat_timeout=0.1)
    assert settings is not None
    assert settings.serves
    assert settings.heartbeat_interval == 0.05  # floor


def test_requested_port_is_used_and_in_the_token() -> None:
    topology = make_topology(nodes=2, master_port=29500)
    settings = settings_of(topology, requested_port=31000)
    default = settings_of(topology)
    assert settings is not None and default is not None
    assert settings.port == 31000
    assert default.port == 29501
    assert settings.token != default.token


def test_same_token_on_every_node() -> None:
    for master_port in (None, 29500):
        tokens = set()
        for rank in range(4):
            topology = make_topology(
                nodes=4, nproc_per_node=2, node_rank=rank, master_port=master_port
            )
            settings = settings_of(topology, secret="s")
            assert settings is not None
            assert settings.node_rank == rank
            assert settings.host == "192.0.2.11"
            tokens.add((settings.port, settings.token))
        assert len(tokens) == 1


def test_other_secret_other_token() -> None:
    topology = make_topology(nodes=2, master_port=29500)
    plain, secret, other = (settings_of(topology, secret=s) for s in ("", "a", "b"))
    assert plain is not None and secret is not None and other is not None
    assert len({plain.token, secret.token, other.token}) == 3
    assert plain.port == secret.port == other.port


def test_other_job_other_token() -> None:
    one = settings_of(make_topology(nodes=2, master_port=29500, job_id="a"))
    other = settings_of(make_topology(nodes=2, master_port=29500, job_id="b"))
    assert one is not None and other is not None
    assert one.token != other.token
