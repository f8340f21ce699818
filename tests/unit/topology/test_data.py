"""Data variables: DATASET, DATASET_MAP, CACHED_DATASET, RESULT, MODEL (and the legacy names)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from malaunch.errors import ExitCode, TopologyError
from malaunch.models import DataPaths
from malaunch.testing import read_env_file
from malaunch.topology.data import missing_paths, parse_data_paths

FIXTURES = Path(__file__).parents[2] / "fixtures"
CACHE_ID = "12fdb1cd-0000-4000-8000-00000000c0de"


def test_octopus_example() -> None:
    data = parse_data_paths(read_env_file(FIXTURES / "shared" / "octopus_env_example.env"))
    assert data == DataPaths(
        dataset="/home/ma-user/datasets",
        dataset_map={
            "incr-dataset-1": "/home/ma-user/datasets/dataset-0",
            "incr-dataset-2": "/home/ma-user/datasets/dataset-1",
            "full-cache": f"/home/ma-user/cached-datasets/{CACHE_ID}/dataset",
        },
        cached_dataset="/home/ma-user/cached-datasets",
        result="/home/ma-user/modelarts/result",
        model="/home/ma-user/modelarts/user-job-dir/model",
    )


def test_non_ascii_dataset_names() -> None:
    data = parse_data_paths(read_env_file(FIXTURES / "env" / "octopus_non_ascii_dataset_map.env"))
    assert data.dataset_map == {
        "城市道路-训练集": "/tmp/data/dataset/dataset-0",
        "夜间场景": "/tmp/data/dataset/dataset-1",
    }
    assert data.dataset == "/tmp/data/dataset"


def test_legacy_names() -> None:
    data = parse_data_paths(read_env_file(FIXTURES / "env" / "octopus_legacy_paths.env"))
    assert data.dataset_map == {
        "dataset-0": "/tmp/data/dataset/dataset-0",
        "dataset-1": "/tmp/data/dataset/dataset-1",
    }
    assert data.model == "/tmp/data/model"
    assert data.result == "/tmp/result"
    assert data.dataset is None


def test_current_names_win_over_legacy_ones() -> None:
    env = {
        "DATASET_MAP": '{"new": "/n"}',
        "DATASET_PATH": "['/old']",
        "MODEL": "/m",
        "MODEL_PATH": "/old-m",
    }
    data = parse_data_paths(env)
    assert data.dataset_map == {"new": "/n"}
    assert data.model == "/m"


def test_legacy_same_folder_names_keep_both_paths() -> None:
    data = parse_data_paths({"DATASET_PATH": "['/a/ds', '/b/ds']"})
    assert data.dataset_map == {"ds": "/a/ds", "/b/ds": "/b/ds"}


def test_nothing_set() -> None:
    assert parse_data_paths({}) == DataPaths()
    assert parse_data_paths({"DATASET_MAP": "", "RESULT": " "}) == DataPaths()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"DATASET_MAP": "{'a': '/x'}"},
            "DATASET_MAP is not valid JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1))",
        ),
        (
            {"DATASET_MAP": '["/x"]'},
            "DATASET_MAP: expected a JSON object of dataset name to path, got an array",
        ),
        (
            {"DATASET_MAP": '"/x"'},
            "DATASET_MAP: expected a JSON object of dataset name to path, got a string",
        ),
        (
            {"DATASET_MAP": '{"数据": 5}'},
            'DATASET_MAP["数据"]: expected a path, got 5',
        ),
        (
            {"DATASET_MAP": '{"a": ""}'},
            'DATASET_MAP["a"]: expected a path, got ""',
        ),
        (
            {"DATASET_MAP": '{"a": null}'},
            'DATASET_MAP["a"]: expected a path, got null',
        ),
        (
            {"DATASET_PATH": "/tmp/data/[x"},
            "DATASET_PATH='/tmp/data/[x': expected a Python list literal of paths",
        ),
        (
            {"DATASET_PATH": "[1, 2]"},
            "DATASET_PATH='[1, 2]': expected a Python list literal of paths",
        ),
        # literal_eval raises TypeError here, MemoryError and RecursionError below.
        (
            {"DATASET_PATH": "{[]}"},
            "DATASET_PATH='{[]}': expected a Python list literal of paths",
        ),
        (
            {"DATASET_PATH": "-" * 100_000 + "1"},
            f"DATASET_PATH={'-' * 60!r}... (100001 characters): expected a Python list literal "
            "of paths",
        ),
        (
            {"DATASET_PATH": "1" + "+1" * 30_000},
            f"DATASET_PATH={('1' + '+1' * 30)[:60]!r}... (60001 characters): expected a Python "
            "list literal of paths",
        ),
        (
            {"DATASET_MAP": '{"a": ' + "9" * 5000 + "}"},
            "DATASET_MAP: a: an integer of 5000 digits (at most 4300)",
        ),
    ],
)
def test_malformed(env: Dict[str, str], message: str) -> None:
    with pytest.raises(TopologyError) as info:
        parse_data_paths(env)
    assert str(info.value) == message
    assert info.value.exit_code == ExitCode.DATA_ERROR


def test_missing_paths(tmp_path: Path) -> None:
    present = tmp_path / "dataset"
    present.mkdir()
    gone = str(tmp_path / "gone")
    data = DataPaths(
        dataset=str(present),
        dataset_map={"a": str(present), "b": gone},
        result=str(tmp_path / "result"),
        model=gone,
    )
    assert missing_paths(data) == [gone, str(tmp_path / "result")]
    assert missing_paths(DataPaths()) == []
