"""What ``malaunch logs`` shows (``--ranks``, ``--nodes``, ``--grep``, ``--since``) and how a
line looks: ``[node 0 rank 3] text``, terminal controls escaped unless ``--raw``."""

from __future__ import annotations

import dataclasses
import datetime
import re
from typing import List, Optional, Protocol, Union

import re2

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
SKIP_AFTER_MISSES = 8  # lines in a row that --grep leaves out before it skips ahead (Grep)
# How Python holds an argument's bytes that are not UTF-8 (surrogateescape): RE2 reads UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")


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


class Grep:
    """A compiled ``--grep`` pattern. RE2 runs it in time linear in the text, whatever the
    pattern: no pattern can make ``malaunch logs`` hang (Python's ``re`` takes exponential time
    on ``(a+)+$``)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._line = _compile(pattern, never_nl=False)
        # The same pattern over a whole block, no match across a newline (never_nl), ^ and $
        # at each line's ends: it finds a match in every line that has one alone, so one C
        # call passes over the lines before the next match (see lines()). Not for a pattern
        # anchored to the text itself (\A, \z) or turning a flag off (multi-line): those go
        # line by line.
        self._block = None if _TEXT_ANCHORED.search(pattern) else _compile_or_none(
            "(?m)" + pattern
        )  # fmt: skip

    def search(self, line: str) -> bool:
        """Whether the pattern finds something in ``line`` (without its newline)."""
        return self._line.search(line) is not None

    def lines(self, text: str) -> List[str]:
        """The lines of ``text`` (each ending in a newline) the pattern finds something in.

        A line before the block search's next match has no match of its own, so it is passed
        over; from the line of that match on, lines are searched one by one until a few in a
        row miss.
        """
        if self._block is None:
            search = self._line.search
            return [line for line in text.split("\n")[:-1] if search(line) is not None]
        # Bytes: RE2 takes a position in them as it is (a str is encoded again at each call).
        data = text.encode("utf-8", errors="surrogateescape")
        skip, search = self._block.search, self._line.search
        found: List[str] = []
        position = 0
        while position < len(data):
            match = skip(data, position)
            if match is None:
                break
            position = data.rfind(b"\n", 0, match.start()) + 1
            # Where lines match often, a search per line costs less than a skip per match.
            misses = 0
            while position < len(data) and misses < SKIP_AFTER_MISSES:
                end = data.find(b"\n", position)
                end = len(data) if end < 0 else end  # a last line without its newline
                line, position = data[position:end], end + 1
                if search(line) is None:
                    misses += 1
                else:
                    misses = 0
                    found.append(line.decode("utf-8", errors="surrogateescape"))
        return found


class _Match(Protocol):
    def start(self) -> int: ...


class _Regexp(Protocol):
    def search(self, text: Union[str, bytes], pos: int = 0) -> Optional[_Match]: ...


# RE2's errors for what it lacks, rather than for a pattern that is wrong in any syntax:
# backreferences and \Z (an escape), lookaround, atomic groups and (?P=name) (a Perl
# operator), possessive quantifiers, counts above 1,000. Python's re is not asked: what it
# reads depends on its version (3.11 added a++ and (?>...)).
_LACKS = (
    "invalid escape sequence",
    "invalid perl operator",
    "bad repetition operator",
    "invalid repetition size",
)
# \A, \z, or a flag group that turns a flag off (such as multi-line): see Grep.
_TEXT_ANCHORED = re.compile(r"\\[Az]|\(\?[A-Za-z]*-")


def _compile(pattern: str, never_nl: bool) -> _Regexp:
    options = re2.Options()
    options.log_errors = False  # RE2 would write its own lines to stderr
    options.never_nl = never_nl
    compiled: _Regexp = re2.compile(pattern, options=options)
    return compiled


def _compile_or_none(pattern: str) -> Optional[_Regexp]:
    try:
        return _compile(pattern, never_nl=True)
    except re2.error:  # past RE2's memory budget by a hair: lines alone then
        return None


def compile_grep(text: str) -> Grep:
    """``--grep``: an RE2 regular expression, searched in each line (without its prefix).

    A pattern RE2 does not run (backreferences, lookaround: nothing with a linear-time form)
    is a usage error that says so; so is one that is no regular expression at all.
    """
    if _SURROGATE.search(text):
        msg = f"--grep {text!r}: not UTF-8 text (bytes that decode to no character)"
        raise UsageError(msg)
    try:
        return Grep(text)
    except re2.error as exc:
        reason = _reason(exc)
    if reason.startswith(_LACKS):
        msg = (
            f"--grep {text!r}: RE2 does not support this pattern ({reason}); --grep runs RE2, "
            "in time linear in the line, which has no backreferences or lookaround"
        )
    else:
        msg = f"--grep {text!r}: not a regular expression ({reason})"
    raise UsageError(msg)


def _reason(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else exc
    if isinstance(reason, bytes):
        return reason.decode("utf-8", errors="replace")
    return str(reason)


@dataclasses.dataclass(frozen=True)
class Selection:
    """The filters of one ``malaunch logs`` command."""

    ranks: RankSpec = EVERY
    nodes: RankSpec = EVERY
    grep: Optional[Grep] = None
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
            text = "".join(f"{line}\n" for line in self.grep.lines(text))
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
