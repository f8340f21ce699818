"""--path-mapping: X2MindSpore's path_mapping_config.py read without executing it, JSON, TOML."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from malaunch.errors import ExitCode, MissingInputError, UsageError
from malaunch.staging import MappingFileError, StageMapping, read_path_mapping

TEMPLATE = """#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright Huawei Technologies Co., Ltd. 2022-2022. All rights reserved.

PATH_MAPPING_CONFIG = {
    'input': {
        # Add path mapping here for downloading data before training
        # format: <local path>: <obs/s3 path>
        # For example: '/data/dataset/imagenet': 'obs://dataset/imagenet',
%s
    },
    'output': {
        # Add path mapping here for uploading output after training
        # format: <local path>: <obs/s3 path>
        # For example: './checkpoints': 'obs://outputs/',
%s
    }
}
"""


def _write(tmp_path: Path, text: str, name: str = "path_mapping_config.py") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_x2mindspore_template_as_generated_maps_nothing(tmp_path: Path) -> None:
    assert read_path_mapping(_write(tmp_path, TEMPLATE % ("", ""))) == []


def test_the_x2mindspore_template_filled_in(tmp_path: Path) -> None:
    text = TEMPLATE % (
        "        '/data/dataset/imagenet': 'obs://dataset/imagenet',\n        'a': 's3://b/a'",
        "        './checkpoints': 'obs://outputs/',",
    )
    assert read_path_mapping(_write(tmp_path, text)) == [
        StageMapping(local="/data/dataset/imagenet", url="obs://dataset/imagenet", direction="in"),
        StageMapping(local="a", url="s3://b/a", direction="in"),
        StageMapping(local="./checkpoints", url="obs://outputs/", direction="out"),
    ]


def test_other_statements_are_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = (
        f"import os\nos.mkdir({str(marker)!r})\n"
        "PATH_MAPPING_CONFIG: dict = {'input': {'d': 's3://b/d'}}\n"
        "def helper():\n    return 1\n"
    )
    assert read_path_mapping(_write(tmp_path, text)) == [
        StageMapping(local="d", url="s3://b/d", direction="in")
    ]
    assert not marker.exists()


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("PATH_MAPPING_CONFIG = __import__('os').system('x')\n", 1, "expected a dict of tables"),
        ("PATH_MAPPING_CONFIG = dict(input={})\n", 1, "expected a dict of tables"),
        (
            "x = 1\nPATH_MAPPING_CONFIG = {'input': {open('/etc/passwd').read(): 'u'}}\n",
            2,
            "expected a string literal",
        ),
        (
            "PATH_MAPPING_CONFIG = {\n 'input': {'a': f'obs://{x}'}}\n",
            2,
            "expected a string literal",
        ),
        ("PATH_MAPPING_CONFIG = {\n 'input': {'a': 'obs://' + 'x'}}\n", 2, "string literal"),
        ("PATH_MAPPING_CONFIG = {'input': {'a': 1}}\n", 1, "expected a string literal"),
        ("PATH_MAPPING_CONFIG = {'input': ['a']}\n", 1, "expected a dict of LOCAL: URL strings"),
        ("PATH_MAPPING_CONFIG = {'inputs': {}}\n", 1, "unknown table 'inputs'"),
        ("PATH_MAPPING_CONFIG = {**other}\n", 1, "** unpacking is not read"),
        ("PATH_MAPPING_CONFIG = {'input': {'a': 'x',\n 'a': 'y'}}\n", 2, "duplicate key 'a'"),
        ("PATH_MAPPING_CONFIG = {}\nPATH_MAPPING_CONFIG = {}\n", 2, "must be assigned once"),
        ("PATH_MAPPING_CONFIG = {}\nPATH_MAPPING_CONFIG['input'] = {}\n", 2, "assigned once"),
        ("PATH_MAPPING_CONFIG = {}\nPATH_MAPPING_CONFIG.update(x)\n", 2, "assigned once"),
        ("if True:\n    PATH_MAPPING_CONFIG = {}\n", 1, "assigned once"),
        ("PATH_MAPPING_CONFIG = OTHER = {}\n", 1, "assigned once"),
        ("PATH_MAPPING_CONFIG = {'input': {'a': 'x'}\n", 1, "not Python"),
        ("PATH_MAPPING_CONFIG = {'input': {'{host}': 'x'}}\n", 0, "unknown placeholder {host}"),
    ],
)
def test_hostile_or_malformed_python_is_65_naming_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(MappingFileError) as caught:
        read_path_mapping(path)
    assert caught.value.exit_code == ExitCode.DATA_ERROR
    where = f"{path}:{line}: " if line else f"{path}: "
    assert str(caught.value).startswith(where), str(caught.value)
    assert message in str(caught.value)


def test_no_assignment_at_all_is_65(tmp_path: Path) -> None:
    path = _write(tmp_path, "CONFIG = {}\n")
    with pytest.raises(MappingFileError, match="no assignment of a dict literal"):
        read_path_mapping(path)


def test_json_holds_the_same_tables(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"input": {"d": "s3://b/d"}, "output": {"o": "file:///x"}}', "m.json")
    assert [m.direction for m in read_path_mapping(path)] == ["in", "out"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"input": {"d": 1}}', "input['d']: expected a URL string"),
        ('{"input": []}', "input: expected a table"),
        ('{"in": {}}', "unknown table 'in'"),
        ("[]", "expected {"),
        ('{"input": {"d": "x", "d": "y"}}', "duplicate key 'd'"),
        ('{\n"input": {', ":2: not JSON"),
    ],
)
def test_malformed_json_is_65(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(MappingFileError) as caught:
        read_path_mapping(_write(tmp_path, text, "m.json"))
    assert message in str(caught.value)


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="tomllib is in the standard library from 3.11"
)
def test_toml_holds_the_same_tables(tmp_path: Path) -> None:
    path = _write(
        tmp_path, '[input]\n"data/x" = "s3://b/x"\n[output]\nckpt = "obs://b/c/"\n', "m.toml"
    )
    assert read_path_mapping(path) == [
        StageMapping(local="data/x", url="s3://b/x", direction="in"),
        StageMapping(local="ckpt", url="obs://b/c/", direction="out"),
    ]
    with pytest.raises(MappingFileError, match="not TOML"):
        read_path_mapping(_write(tmp_path, "[input\n", "bad.toml"))


def test_a_missing_file_is_66_and_other_kinds_are_refused(tmp_path: Path) -> None:
    with pytest.raises(MissingInputError) as caught:
        read_path_mapping(tmp_path / "none.py")
    assert caught.value.exit_code == ExitCode.NO_INPUT
    with pytest.raises(UsageError, match=r"expected a \.py, \.json or \.toml file"):
        read_path_mapping(_write(tmp_path, "", "m.yaml"))
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(MappingFileError, match="not a regular file"):
        read_path_mapping(tmp_path / "fifo.json")  # refused at once, never blocks
    (tmp_path / "bin.py").write_bytes(b"\xff\xfe")
    with pytest.raises(MappingFileError, match="not UTF-8"):
        read_path_mapping(tmp_path / "bin.py")
    (tmp_path / "big.json").write_bytes(b" " * (2 << 20))
    with pytest.raises(MappingFileError, match="more than"):
        read_path_mapping(tmp_path / "big.json")
