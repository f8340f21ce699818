"""What ``malaunch logs`` shows (``--ranks``, ``--nodes``, ``--grep``, ``--since``) and how a
line looks: ``[node 0 rank 3] text``, terminal controls escaped unless ``--raw``."""

from __future__ import annotations

import dataclasses
import datetime
import re
from typing import Optional, Pattern

from malaunch.console import escape_text
from malaunch.errors import UsageError
from malaunch.logs.discover import RankLog
from malaunch.logs.reader import Block
from malaunch.rankspec import RankSpec

DURATION = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,9})?)([smhd]?)")
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SINCE = 100 * 366 * 86400.0  # a century: beyond it a duration is a typo
EVERY = RankSpec(None)
SINCE_HELP = "a duration such as 30s, 5m, 2h or 1d, or an ISO time such as 2026-05-01T12:00:00"


def parse_since(text: str, now: float) -> float:
    """``--since``: the earliest arrival time to show, as seconds since the epoch.

    A duration counts back from ``now`` (``90``, ``90s``, ``5m``, ``2h``, ``1d``); an ISO 8601
    time is local unless it carries an offset or ``Z``.
    """
    plain = text.strip()
    match = DURATION.fullmatch(plain)
    if match:
        seconds = float(match[1]) * UNITS[match[2]]
        if seconds > MAX_SINCE:
            msg = f"--since {text!r}: more than a century"
            raise UsageError(msg)
        return now - seconds
    if plain.endswith(("Z", "z")):
        plain = plain[:-1] + "+00:00"  # Python before 3.11 does not read "Z"
    try:
        if not plain.isascii():
            raise ValueError(plain)  # fromisoformat takes other scripts' digits
        return datetime.datetime.fromisoformat(plain).timestamp()
    except (ValueError, OverflowError, OSError) as exc:
        msg = f"--since {text!r}: expected {SINCE_HELP}"
        raise UsageError(msg) from exc


def compile_grep(text: str) -> Pattern[str]:
    """``--grep``: a Python regular expression, searched in each line (without its prefix)."""
    try:
        return re.compile(text)
    except (re.error, RecursionError, OverflowError) as exc:
        msg = f"--grep {text!r}: not a regular expression ({exc})"
        raise UsageError(msg) from exc


@dataclasses.dataclass(frozen=True)
class Selection:
    """The filters of one ``malaunch logs`` command."""

    ranks: RankSpec = EVERY
    nodes: RankSpec = EVERY
    grep: Optional[Pattern[str]] = None
    since: Optional[float] = None
    raw: bool = False  # --raw: terminal controls pass through as the log holds them

    def wants(self, log: RankLog) -> bool:
        """Whether a log is read at all: its node and rank (a process without a rank, such as
        a ps task or a scheduler, only when ``--ranks`` is ``all``)."""
        if log.node not in self.nodes:
            return False
        return self.ranks.everything or (log.rank is not None and log.rank in self.ranks)

    def render(self, block: Block) -> str:
        """The block's lines as printed, each prefixed; those ``--grep`` or ``--since`` leave
        out are gone (lines without an arrival time have none to compare with ``--since``)."""
        if self.since is not None and (block.time is None or block.time < self.since):
            return ""
        text = block.text
        if self.grep is not None:
            search = self.grep.search
            lines = block.text.split("\n")[:-1]  # text ends with a newline
            text = "".join(f"{line}\n" for line in lines if search(line))
        return self.prefixed(text, f"[{block.log.label}] ")

    def prefixed(self, text: str, prefix: str) -> str:
        """Lines (``text`` ends with a newline, or is empty) as printed: escaped for a
        terminal unless raw, each prefixed."""
        if not text:
            return ""
        if not self.raw:
            text = escape_text(text, prefix)
        # One C-level replace prefixes every line, as the launcher's console relay does.
        return prefix + text[:-1].replace("\n", "\n" + prefix) + "\n"
