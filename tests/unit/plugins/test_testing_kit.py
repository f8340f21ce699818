"""malaunch.testing: the builders match the real sources, check_plan catches each fault."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator, List, Sequence

import click
import pytest

from malaunch.hookspecs import hookimpl
from malaunch.models import (
    Framework,
    LaunchPlan,
    PlanOptions,
    ProcessSpec,
    ResolveOptions,
    Topology,
)
from malaunch.params import Integer
from malaunch.pipeline import build_plan
from malaunch.plugins import Origin, PluginSet, load_plugins
from malaunch.testing import (
    check_plan,
    clean_env,
    environment,
    make_plan,
    make_ps_topology,
    make_rank_table_topology,
    make_topology,
    read_env_file,
    write_fake_distribution,
)
from malaunch.topology import tf_ps
from malaunch.topology.ranktable import source

SHARED = Path(__file__).parents[2] / "fixtures" / "shared"


def test_rank_table_builder_matches_the_ranktable_source() -> None:
    path = str(SHARED / "ranktable_v1_0_2nodes_8dev.json")
    env = {"RANK_TABLE_FILE_V_1_0": path, "MA_CURRENT_HOST_IP": "192.0.2.12"}
    resolved = source.resolve(env, ResolveOptions(wait_timeout=0, hostnames=()))
    assert make_rank_table_topology(node_rank=1, rank_table_file=path) == resolved


def test_ps_builder_matches_the_tf_ps_source() -> None:
    env = read_env_file(SHARED / "tf_ps_env_2ps_3workers.env")
    resolved = tf_ps.resolve(env, ResolveOptions())
    assert make_ps_topology(num_ps=2, num_workers=3, role="worker", index=1) == resolved


def test_topology_builder_shapes() -> None:
    topology = make_topology(nodes=3, nproc_per_node=2, node_rank=2, master_port=1234)
    assert [n.host for n in topology.nodes] == ["192.0.2.11", "192.0.2.12", "192.0.2.13"]
    assert [d.rank for d in topology.this_node.devices] == [4, 5]
    assert (topology.world_size, topology.master_addr, topology.master_port) == (
        6, "192.0.2.11", 1234,
    )  # fmt: skip
    assert make_topology(nodes=1).master_addr == "127.0.0.1"


def _plan(*processes: ProcessSpec) -> LaunchPlan:
    return LaunchPlan(framework="fake", topology=make_topology(nodes=1), processes=processes)


def _worker(rank: int, local_rank: int, **changes: Any) -> ProcessSpec:
    spec = ProcessSpec(
        role="worker",
        rank=rank,
        local_rank=local_rank,
        argv=("python", "train.py"),
        env={"RANK": str(rank)},
        cwd="/work",
        log_file=f"/logs/worker-{rank}.log",
    )
    # model_copy skips validation, as a buggy plugin's hand-made objects might.
    return spec.model_copy(update=changes)


def _service(log_file: str) -> ProcessSpec:
    return _worker(0, 0, role="ps", service=True, log_file=log_file).model_copy(
        update={"rank": None}
    )


def test_a_sound_plan_passes() -> None:
    check_plan(_plan(_service("/logs/ps.log"), _worker(4, 0), _worker(5, 1)))


@pytest.mark.parametrize(
    ("processes", "expected"),
    [
        ((), "the plan has no processes"),
        ((_worker(0, 0, argv=()),), "argv must be a non-empty list of str"),
        ((_worker(0, 0, argv=("python", 3)),), "argv must be a non-empty list of str"),
        ((_worker(0, 0, env={"RANK": 0}),), "env['RANK'] must be a str"),
        ((_worker(0, 0, env={"A=B": "1"}),), "env key 'A=B' is not a variable name"),
        ((_worker(0, 0, cwd="work"),), "cwd 'work' is not absolute"),
        ((_worker(0, 0, log_file="w.log"),), "log_file 'w.log' is not absolute"),
        (
            (_worker(0, 0), _worker(1, 1, log_file="/logs/worker-0.log")),
            "log files are not distinct",
        ),
        ((_worker(0, 0), _worker(0, 1, log_file="/l/x")), "ranks are not unique: [0, 0]"),
        ((_worker(0, 0), _worker(2, 1)), "worker ranks are not dense (consecutive): [0, 2]"),
        ((_worker(0, 1), _worker(1, 2)), "worker local ranks are not 0..1: [1, 2]"),
        ((_worker(0, 0, role=""),), "empty role"),
        ((_worker(-1, 0),), "negative rank"),
        ((_worker(0, 0, service=True),), "every process is a service"),
        (
            (
                _worker(0, 0),
                _service("/l/a"),
                _service("/l/b"),
            ),
            "services are not distinct by role/rank/local rank",
        ),
    ],
)
def test_each_fault_is_named(processes: tuple[ProcessSpec, ...], expected: str) -> None:
    with pytest.raises(AssertionError) as info:
        check_plan(_plan(*processes))
    assert expected in str(info.value)
    assert "plan of framework 'fake' breaks" in str(info.value)


def test_an_unnamed_framework_is_caught() -> None:
    broken = _plan(_worker(0, 0)).model_copy(update={"framework": ""})
    with pytest.raises(AssertionError, match="empty framework name"):
        check_plan(broken)


def test_a_plan_that_does_not_serialise_cleanly_is_caught() -> None:
    with pytest.raises(
        AssertionError, match=r"the plan does not serialise cleanly: Pydantic serializer warnings"
    ):
        check_plan(_plan(_worker(0, 0, env={"RANK": 0})))


def test_make_plan_goes_through_the_installed_plugins(tmp_path: Path) -> None:
    plan = make_plan("torch_ddp", make_topology(nodes=1, nproc_per_node=2), log_dir=tmp_path)
    assert plan.framework == "torch_ddp"
    assert [p.log_file for p in plan.processes] == [
        str(tmp_path / "worker-0.log"),
        str(tmp_path / "worker-1.log"),
    ]


PADDLE = """\
from malaunch.api import Framework, hookimpl

@hookimpl
def malaunch_register_frameworks():
    return [Framework(name="fakepaddle", plan=lambda *a: None,
                      launcher_vars=["PADDLE_TRAINER_ID"], env_prefixes=["PADDLE_", "FLAGS_"])]
"""


@pytest.fixture
def paddle_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A framework plugin that owns PADDLE_ and FLAGS_, installed for this test only."""
    write_fake_distribution(tmp_path, "malaunch-fakepaddle", "1.0",
                            {"fakepaddle": "fake_paddle"}, {"fake_paddle": PADDLE})  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    environment._frameworks_env.cache_clear()
    yield
    environment._frameworks_env.cache_clear()
    sys.modules.pop("fake_paddle", None)


def test_clean_env_removes_what_the_installed_frameworks_own(
    paddle_installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PADDLE_TRAINER_ENDPOINTS", "FLAGS_eager_delete_tensor_gb", "MS_SCHED_PORT"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    monkeypatch.setenv("PADDLEX_HOME", "/opt/x")  # not the prefix: kept
    env = clean_env({"PADDLE_TRAINER_ID": "0"})
    assert {k for k in env if k.startswith(("PADDLE", "FLAGS_", "MS_", "TORCH"))} == {
        "PADDLEX_HOME",
        "PADDLE_TRAINER_ID",  # given as extra: the caller's own
    }


SEEN: List[PlanOptions] = []


def _recording_plan(topology: Topology, command: Sequence[str], options: PlanOptions) -> LaunchPlan:
    SEEN.append(options)
    return LaunchPlan(framework="recorder", topology=topology, processes=(_worker(0, 0),))


def _upper(ctx: click.Context, param: click.Parameter, value: str) -> str:
    return value.upper()


class Recorder:
    """A framework whose plan keeps the options it was given, with one option of each kind."""

    @hookimpl
    def malaunch_register_frameworks(self) -> List[Framework]:
        options = [
            click.Option(["--rec-port"], type=Integer(1, 65535), default="8118"),
            click.Option(["--rec-flag/--no-rec-flag"], default=True),
            click.Option(["--rec-switch"], is_flag=True),
            click.Option(["--rec-name"], default="abc", callback=_upper),
            click.Option(["--rec-unset"], type=Integer(1, 9)),
        ]
        return [Framework(name="recorder", plan=_recording_plan, options=options)]


@pytest.fixture(scope="module")
def with_recorder() -> PluginSet:
    return load_plugins(clean_env(), extra=[(Recorder(), Origin("rec", "malaunch-rec", "1"))])


def test_make_plan_gives_every_option_at_its_declared_default(with_recorder: PluginSet) -> None:
    SEEN.clear()
    make_plan("recorder", make_topology(nodes=1, nproc_per_node=1), plugins=with_recorder)
    make_plan("recorder", make_topology(nodes=1, nproc_per_node=1), plugins=with_recorder,
              rec_port=29400, rec_flag=False, job_port=29401)  # fmt: skip
    # As the launch command gives them: converted by type, through the callback.
    assert SEEN[0].framework_options == {
        "rec_port": 8118, "rec_flag": True, "rec_switch": False, "rec_name": "ABC",
        "rec_unset": None,
    }  # fmt: skip
    assert SEEN[0].job_port is None
    assert SEEN[1].framework_options["rec_port"] == 29400
    assert SEEN[1].framework_options["rec_flag"] is False
    assert SEEN[1].job_port == 29401


def test_the_pipeline_gives_them_too(with_recorder: PluginSet, tmp_path: Path) -> None:
    SEEN.clear()
    build_plan(
        with_recorder,
        {},
        framework="recorder",
        source="local",
        command=["python", "train.py"],
        resolve_options=ResolveOptions(nproc_per_node=1, log_dir=str(tmp_path)),
        plan_options=PlanOptions(log_dir=str(tmp_path), cwd=str(tmp_path)),
    )
    assert SEEN[0].framework_options["rec_name"] == "ABC"


def test_make_plan_names_an_option_the_framework_lacks(with_recorder: PluginSet) -> None:
    with pytest.raises(TypeError) as info:
        make_plan("recorder", make_topology(nodes=1), plugins=with_recorder, rec_prot=1)
    assert str(info.value) == (
        "make_plan: framework 'recorder' has no option 'rec_prot' (its options: rec_flag, "
        "rec_name, rec_port, rec_switch, rec_unset)"
    )
