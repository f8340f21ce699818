"""docs/platforms.md shows what ``malaunch render`` prints: each ``malaunch render`` command
followed by a YAML block is run, and its output must be that block, byte for byte."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import List, Tuple

import pytest

from malaunch.cli import render
from malaunch.testing import clean_env

DOCS = Path(__file__).parents[3] / "docs" / "platforms.md"


def shown_renders() -> List[Tuple[List[str], str]]:
    """(render arguments, the manifest block after them) from the page."""
    blocks = re.findall(r"```(\w*)\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    found = []
    for (kind, body), (next_kind, following) in zip(blocks, blocks[1:]):
        line = body.strip()
        if kind == "sh" and line.startswith("malaunch render ") and next_kind == "yaml":
            argv = shlex.split(line.split(" | ")[0])
            found.append((argv[2:], following))
    return found


def test_the_page_shows_a_manifest_for_every_target() -> None:
    targets = sorted({args[0] for args, _ in shown_renders()})
    assert targets == ["ascendjob", "pytorchjob", "tfjob", "volcano"]


@pytest.mark.parametrize("args", [args for args, _ in shown_renders()], ids=lambda a: a[0])
def test_the_shown_manifest_is_what_render_prints(
    args: List[str], capsys: pytest.CaptureFixture[str]
) -> None:
    shown = dict((tuple(a), text) for a, text in shown_renders())[tuple(args)]
    assert render.main(args, clean_env()) == 0
    assert capsys.readouterr().out == shown
