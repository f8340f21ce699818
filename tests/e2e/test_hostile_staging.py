"""Hostile staging files (issue 13): no traceback, no hang, no misread.

``--path-mapping`` files: every case runs the installed ``malaunch`` on a file written to the
test's directory and checks the documented exit code (65 malformed, 66 missing or unreadable)
and the exact one ``malaunch: error:`` line naming the file. Those launches plan only
(``--dry-run``): the file is read before anything else happens. Last, a stage-in manifest
left damaged in the destination is as good as none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

from malaunch.testing import CliResult, clean_env, malaunch_executable, run_cli

TIMEOUT = 20.0
HUGE = "9" * 5000  # past Python's 4,300-digit int() limit
DEEP = 100_000  # far past any parser's nesting
# Python 3.9 and 3.10 build the AST of a long chain of + or of attributes; 3.11 and later give
# up (RecursionError): the file is refused either way, or read where the chain is not ours.
READS_LONG_CHAINS = sys.version_info < (3, 11)


def dry_run(tmp: Path, name: str, timeout: float = TIMEOUT) -> CliResult:
    args = ["--framework", "torch_ddp", "--topology", "local", "--dry-run"]
    return run_cli([*args, "--path-mapping", name, "--", "true"], cwd=tmp, timeout=timeout)


def assert_refused(result: CliResult, code: int, line: str) -> None:
    shown = f"exit {result.code}\nstderr: {result.stderr[:2000]!r}"
    assert "Traceback" not in result.stderr + result.stdout, shown
    assert (result.code, result.stdout) == (code, ""), shown
    assert result.stderr == f"malaunch: error: {line}\n", shown


def _python(value: str) -> str:
    return f"PATH_MAPPING_CONFIG = {value}\n"


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        pytest.param(
            "deep.json",
            '{"input": ' + "[" * DEEP + "]" * DEEP + "}",
            "deep.json: not JSON: nested too deeply to read",
            id="json-deep",
        ),
        pytest.param(
            "long.json",
            '{"input": {"data": ' + HUGE + "}}",
            "long.json: input.data: an integer of 5000 digits (at most 4300)",
            id="json-long-int",
        ),
        pytest.param(
            "deep.toml",
            "[input]\ndata = " + "[" * DEEP + "]" * DEEP + "\n",
            "deep.toml: not TOML: nested too deeply to read",
            id="toml-deep-array",
        ),
        pytest.param(
            "inline.toml",
            "input = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n",
            "inline.toml: not TOML: nested too deeply to read",
            id="toml-deep-inline-table",
        ),
        pytest.param(
            "long.toml",
            f"[input]\ndata = {HUGE}\n",
            "long.toml: not TOML: an integer too long to read",
            id="toml-long-int",
        ),
        pytest.param(
            "dict.py",
            _python('{"a": ' * DEEP + "1" + "}" * DEEP),
            "dict.py:1: not Python: too many nested parentheses",
            id="python-deep-dict",
        ),
        pytest.param(
            "minus.py",
            _python('{"input": {"data": ' + "-" * DEEP + "1}}"),
            "minus.py: not Python: nested too deeply to read",
            id="python-deep-unary",
        ),
        pytest.param(
            "plus.py",
            _python('{"input": {"data": "x"' + ' + "x"' * DEEP + "}}"),
            "plus.py:1: PATH_MAPPING_CONFIG: expected a string literal, not Python code"
            if READS_LONG_CHAINS
            else "plus.py: not Python: nested too deeply to read",
            id="python-long-sum",
        ),
        pytest.param(
            "attr.py",
            "x = " + "a." * DEEP + "b\n" + _python('{"input": {}}'),
            None if READS_LONG_CHAINS else "attr.py: not Python: nested too deeply to read",
            id="python-deep-attribute-elsewhere",
        ),
    ],
)
def test_a_file_past_the_parsers_limits_is_65(
    tmp_path: Path, name: str, content: str, line: Optional[str]
) -> None:
    (tmp_path / name).write_text(content)
    result = dry_run(tmp_path, name)
    if line is None:  # an interpreter that reads it: a mapping file like any other
        assert (result.code, result.stderr) == (0, ""), result.stderr
        return
    assert_refused(result, 65, line)


def test_a_long_integer_literal_in_python_is_65(tmp_path: Path) -> None:
    # The words are the interpreter's and differ between versions (Python before 3.10.7 has
    # no digit limit, and refuses the integer as a value that is not a string): file and line.
    (tmp_path / "long.py").write_text(_python('{"input": {"data": ' + HUGE + "}}"))
    result = dry_run(tmp_path, "long.py")
    shown = f"exit {result.code}\nstderr: {result.stderr[:2000]!r}"
    assert (result.code, result.stdout) == (65, ""), shown
    assert result.stderr.startswith("malaunch: error: long.py:1: "), shown
    assert len(result.stderr.splitlines()) == 1, shown
    assert "set_int_max_str_digits" not in result.stderr  # advice for Python programmers


def test_a_duplicate_among_60000_keys_is_found_in_linear_time(tmp_path: Path) -> None:
    # 650 KB, under the 1 MiB cap: counting each key among all the others took over 30 s.
    items = ",".join(f'"{number}":""' for number in range(60_000))
    (tmp_path / "dup.json").write_text('{"input":{' + items + ',"59999":""}}')
    result = dry_run(tmp_path, "dup.json", timeout=10.0)
    assert_refused(result, 65, "dup.json: duplicate key '59999'")


SETPRIV = shutil.which("setpriv")
# Root reads a mode-000 file through CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: without them
# (dropped from the bounding set, and so from the permitted set across the exec), it gets
# EACCES as any other user would.
DROP_READ_CAPS = [
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--bounding-set=-dac_override,-dac_read_search",
    "--",
]


def _without_read_caps(command: List[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    assert SETPRIV is not None
    return subprocess.run(
        [SETPRIV, *DROP_READ_CAPS, *command],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.mark.skipif(SETPRIV is None, reason="needs setpriv(1) to drop the DAC capabilities")
def test_an_unreadable_file_is_66_at_once(tmp_path: Path) -> None:
    (tmp_path / "map.json").write_text('{"input": {"data": "obs://bucket/data"}}')
    (tmp_path / "map.json").chmod(0)
    probe = _without_read_caps(["cat", "map.json"], tmp_path)
    if probe.returncode == 0 or "Permission denied" not in probe.stderr:
        pytest.skip(f"dropping capabilities did not deny the read here: {probe.stderr!r}")
    args = ["--framework", "torch_ddp", "--topology", "local", "--dry-run"]
    args += ["--path-mapping", "map.json", "--", "true"]
    result = _without_read_caps([malaunch_executable(), *args], tmp_path)
    shown = f"exit {result.returncode}\nstderr: {result.stderr!r}"
    assert (result.returncode, result.stdout) == (66, ""), shown
    assert result.stderr == "malaunch: error: --path-mapping map.json: Permission denied\n"


def test_the_file_is_readable_again_once_permitted(tmp_path: Path) -> None:
    # The same file with its mode back: the 66 above is the permission, not the content.
    (tmp_path / "map.json").write_text('{"input": {"data": "obs://bucket/data"}}')
    os.chmod(tmp_path / "map.json", 0o644)
    result = dry_run(tmp_path, "map.json")
    assert result.code == 0, result.stderr
    assert "obs://bucket/data" in result.stdout


@pytest.mark.parametrize(
    "damage",
    ["[" * DEEP + "]" * DEEP, '{"version": ' + HUGE + "}", "{not json"],
    ids=["deep", "long-int", "not-json"],
)
def test_a_damaged_stage_in_manifest_means_transfer_again(tmp_path: Path, damage: str) -> None:
    # The manifest lives in the destination, which a previous run, a user or a shared mount may
    # have left in any state: it only saves transfers, so a damaged one is as good as none.
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "a.txt").write_text("staged\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / ".malaunch-stage-in.json").write_text(damage)
    args = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "1"]
    args += ["--stage-in", f"data={(tmp_path / 'source').as_uri()}", "--log-dir", "logs"]
    result = run_cli([*args, "--", "cat", "data/a.txt"], cwd=tmp_path, timeout=TIMEOUT)
    assert result.code == 0, result.stderr[:2000]
    assert "Traceback" not in result.stderr
    assert "staged" in result.stdout
    assert (tmp_path / "data" / "a.txt").read_text() == "staged\n"
