"""The pre-flight checks: the master port, and the open files a launch needs."""

from __future__ import annotations

import socket
from typing import Iterator

import pytest
from jobs import topology

from malaunch.errors import LaunchError
from malaunch.models import LaunchPlan, Node
from malaunch.supervisor import preflight
from malaunch.supervisor.preflight import check_ports
from ports import Reservations


def plan_with(port: int, node_rank: int = 0) -> LaunchPlan:
    nodes = (Node(index=0, host="127.0.0.1"), Node(index=1, host="127.0.0.2"))
    topo = topology().model_copy(
        update={"master_port": port, "nodes": nodes, "node_rank": node_rank}
    )
    return LaunchPlan(framework="test", topology=topo, processes=())


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A port something listens on, on loopback only (the check must still see it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield int(server.getsockname()[1])


def test_taken_port_on_the_master_is_an_error(listening_port: int) -> None:
    with pytest.raises(
        LaunchError,
        match=rf"master port {listening_port} is already in use.*"
        r"--master-port or MALAUNCH_MASTER_PORT",
    ):
        check_ports(plan_with(listening_port))


def test_other_nodes_do_not_check(listening_port: int) -> None:
    check_ports(plan_with(listening_port, node_rank=1))


def test_free_port_passes(free_port: Reservations) -> None:
    # Reserved (bound, not listening) so that no other process is given it during the check.
    check_ports(plan_with(free_port()))


def test_port_in_time_wait_is_not_taken(free_port: Reservations) -> None:
    """A connection of a finished run lingering in TIME_WAIT must not block the next run."""
    port = free_port()  # kept from other processes once the server below has closed
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server side closes first: its end goes to TIME_WAIT
        client.close()
    check_ports(plan_with(port))


def test_no_port_no_check() -> None:
    plan = plan_with(1)
    plan = plan.model_copy(
        update={"topology": plan.topology.model_copy(update={"master_port": None})}
    )
    check_ports(plan)


def test_taken_job_port_on_node_0_is_an_error(listening_port: int, free_port: Reservations) -> None:
    master = free_port()
    with pytest.raises(LaunchError) as info:
        check_ports(plan_with(master), job_port=listening_port)
    assert str(info.value) == (
        f"job port {listening_port} is already in use on this host (the master node, "
        "127.0.0.1); pick another with --job-port or MALAUNCH_JOB_PORT, or stop the process "
        "listening on it"
    )


def test_job_port_equal_to_the_master_port_is_an_error() -> None:
    with pytest.raises(LaunchError, match="the job port and the master port are both 29500"):
        check_ports(plan_with(29500), job_port=29500)


@pytest.mark.parametrize(
    ("processes", "peers", "what"),
    [
        (1, 1, "1 process and the job channel's 1 connection"),
        (2, 3, "2 processes and the job channel's 3 connections"),
        (1, 0, "1 process needs about"),
        (3, 0, "3 processes need about"),
    ],
)
def test_open_files_refusal_counts_in_words(
    monkeypatch: pytest.MonkeyPatch, processes: int, peers: int, what: str
) -> None:
    # A limit below what any launcher needs: the refusal's wording is what is tested.
    monkeypatch.setattr(preflight, "raise_open_files_limit", lambda: (8, 8))
    with pytest.raises(LaunchError) as info:
        preflight.check_open_files(processes, peers)
    assert str(info.value).startswith(what)
