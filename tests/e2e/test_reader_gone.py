"""A reader of stdout that goes away (``malaunch plugins | head -c1``): the command ends quietly
with exit 0, as ``malaunch logs | head`` does (docs/logs.md); click used to end it with exit 1,
a worker's code, which a platform's retry policy cannot tell from a script's failure."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import List

import pytest

from malaunch.testing import clean_env
from malaunch.testing.commands import malaunch_executable

TABLE = Path(__file__).parents[1] / "fixtures" / "rank_tables" / "v1_0_devices_4_7.json"
COMMANDS = {
    "plugins": ["plugins"],
    "plugins-json": ["plugins", "--json"],
    "topology": ["topology", "--json", "--topology", "local"],
    "dry-run": ["--framework", "torch_ddp", "--topology", "local", "--dry-run", "--", "true"],
    "validate": ["ranktable", "validate", str(TABLE)],
    "render": ["render", "volcano", "--nodes", "2", "--framework", "torch_ddp", "--image",
               "registry.example/train:1", "--", "python", "train.py"],
    "help": ["--help"],
}  # fmt: skip


@pytest.mark.parametrize("args", list(COMMANDS.values()), ids=list(COMMANDS))
def test_a_reader_gone_is_0_without_a_word(args: List[str], tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    try:
        proc = subprocess.run(
            [malaunch_executable(), *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=clean_env(),
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr.decode()) == (0, "")
