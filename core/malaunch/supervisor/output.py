"""Worker output: which ranks reach the console, and whole-line relaying with a prefix.

Log files get the raw bytes of each process; the console gets a copy of chosen processes with a
``[rank N]`` prefix, terminal controls escaped (:mod:`malaunch.console.escape`), through the
one console writer (:mod:`malaunch.console`), which never blocks the launcher. Lines are cut
per process and written as whole lines only, so two ranks' output can never be split or merged
on the console (honcho's ``Printer``, torch's ``TailLog``).
Everything here works on bytes in large chunks: decoding or logging line by line would make the
launcher the bottleneck of a chatty job.
"""

from __future__ import annotations

import re
import string
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from malaunch.console import escape_bytes, is_plain
from malaunch.errors import UsageError
from malaunch.models import ProcessSpec
from malaunch.rankspec import RankSpec, parse_rank_spec
from malaunch.wording import ranks, shortened, spans

# A process that never prints a newline (progress bars with \r) must not grow the buffer
# without bound; past this size the partial line goes out as a line of its own.
MAX_PARTIAL_LINE = 1 << 20

ConsoleWriter = Callable[[bytes], None]


class RankSelection:
    """The processes ``--console-ranks`` selects: ``all``, ``none`` or ranks like ``0,3-5``."""

    def __init__(self, ranks: RankSpec) -> None:
        self.ranks = ranks

    def selects(self, spec: ProcessSpec) -> bool:
        """Whether this process's output is echoed to the console."""
        if self.ranks.everything:
            return True
        return spec.rank is not None and spec.rank in self.ranks


def parse_console_ranks(spec: str) -> RankSelection:
    """Parse ``--console-ranks``: ``all``, ``none``, or comma-separated ranks and ranges."""
    return RankSelection(parse_rank_spec(spec, "--console-ranks"))


def describe(spec: ProcessSpec) -> str:
    """How the launcher names a process: ``rank 3``, ``ps 0``, ``scheduler``."""
    if spec.rank is not None:
        return f"{'rank' if spec.role == 'worker' else spec.role} {spec.rank}"
    if spec.local_rank is not None:
        return f"{spec.role} {spec.local_rank}"
    return spec.role


def describe_all(specs: Sequence[ProcessSpec]) -> str:
    """The processes of a plan, role by role in plan order: ``ps 0-1, ranks 0-2``,
    ``scheduler, ranks 0-7``, ``nodes 0-3``."""
    numbers: Dict[str, List[int]] = {}
    for spec in specs:
        number = spec.rank if spec.rank is not None else spec.local_rank
        numbers.setdefault(spec.role, [])
        if number is not None:
            numbers[spec.role].append(number)
    parts = []
    for role, found in numbers.items():
        if not found:
            parts.append(role)
        elif role in ("worker", "node"):
            parts.append(ranks(found, "rank" if role == "worker" else "node"))
        else:
            parts.append(f"{role} {spans(found)}")
    return ", ".join(parts)


PREFIX_FIELDS = ("node", "host", "rank", "local_rank", "role")
MAX_PREFIX_WIDTH = 64


def console_prefix(spec: ProcessSpec, template: Optional[str] = None, **fields: object) -> bytes:
    """The console prefix of a process's lines: ``b"[rank 3] "`` or ``b"[scheduler] "`` by
    default; with ``--console-prefix``, its template filled with the process's ``node``,
    ``host``, ``rank``, ``local_rank`` and ``role`` (``-`` for a missing rank)."""
    if template is None:
        return f"[{describe(spec)}] ".encode()
    return fill_prefix(template, prefix_values(spec, **fields))


def fill_prefix(template: str, values: Mapping[str, object]) -> bytes:
    """``template`` with every field as text: a checked template (:func:`check_prefix_template`)
    then formats whatever a field holds (a rank, ``-``, a span such as ``0-3``)."""
    return template.format(**{name: str(value) for name, value in values.items()}).encode()


def prefix_values(spec: ProcessSpec, **fields: object) -> Dict[str, object]:
    """A process's values of the ``--console-prefix`` fields (``-`` for a missing rank)."""
    return {
        "rank": "-" if spec.rank is None else spec.rank,
        "local_rank": "-" if spec.local_rank is None else spec.local_rank,
        "role": spec.role,
        **fields,
    }


def check_prefix_template(template: str) -> str:
    """``--console-prefix``: only the documented fields, by plain name, formatted as text with
    a width of at most :data:`MAX_PREFIX_WIDTH` (``{rank:>4}``).

    Fields are always text (a rank may be ``-``, a folded one ``0-7``), so a numeric format
    (``{rank:d}``) is refused here rather than failing once the ranks run; attribute and index
    access (``{host.x}``, ``{rank[0]}``) and nested fields are refused too, and a width is
    bounded (``{rank:>999999999}`` would build a gigabyte per line).
    """

    def refuse(why: str) -> UsageError:
        shown = shortened(template, 80, 60)
        return UsageError(f"--console-prefix {shown!r}: {why[:200]}")

    known = ", ".join("{" + name + "}" for name in PREFIX_FIELDS)
    try:
        fields = [
            (f, spec) for _, f, spec, _ in string.Formatter().parse(template) if f is not None
        ]
    except ValueError as exc:
        raise refuse(str(exc)) from None
    for field, spec in fields:
        if field not in PREFIX_FIELDS:
            if field.split(".")[0].split("[")[0] in PREFIX_FIELDS:
                raise refuse(f"{{{field}}}: a field is used by its plain name ({known})")
            raise refuse(f"unknown field {{{field}}} (known: {known})")
        if "{" in (spec or ""):
            raise refuse(f"{{{field}:{spec}}}: a format cannot hold another field")
        # Compared as text first: int() of 5,000 digits raises past the conversion limit.
        numbers = [digits.lstrip("0") or "0" for digits in re.findall(r"\d+", spec or "")]
        if any(len(n) > 3 or int(n) > MAX_PREFIX_WIDTH for n in numbers):
            raise refuse(f"{{{field}:{spec}}}: a width of at most {MAX_PREFIX_WIDTH}")
    try:
        fill_prefix(template, {name: "0" for name in PREFIX_FIELDS})
    except (ValueError, IndexError) as exc:
        raise refuse(f"{exc} (fields are text: use s, <, > or ^ formats)") from None
    return template


def _plain_lines(chunk: bytes, end: int) -> bool:
    """Whether the complete lines of ``chunk`` (its first ``end`` bytes) hold no control.
    ASCII is looked at whole, without a copy; otherwise the unfinished tail may end inside a
    UTF-8 character, so the lines are looked at alone."""
    whole = end == len(chunk) or chunk.isascii()
    return is_plain(chunk if whole else chunk[:end])


class LineRelay:
    """Cuts one process's output into whole lines and prefixes them for the console.

    With ``escape`` (the default; ``--console-raw`` turns it off), the lines go through
    :func:`malaunch.console.escape_bytes` first: terminal controls other than colour show as
    text, and a carriage return is followed by the prefix again. Output without any control
    takes the fast path of a single ``bytes.replace``.
    """

    def __init__(self, prefix: bytes, write: ConsoleWriter, escape: bool = True) -> None:
        self.prefix = prefix
        self.newline_prefix = b"\n" + prefix
        self.write = write
        self.escape = escape
        self.partial = b""

    def feed(self, chunk: bytes) -> None:
        """Echo the complete lines in ``chunk``; keep an unfinished last line for later."""
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            self._keep(chunk)
            return
        if self.escape and not (_plain_lines(chunk, end) and is_plain(self.partial)):
            self._write_lines(self.partial + chunk[:end])
            self.partial = chunk[end:]
            return
        # One C-level replace prefixes every line (no Python loop over lines). It also puts a
        # prefix after the last newline, before the unfinished tail: both are cut off the view.
        body = chunk.replace(b"\n", self.newline_prefix)
        cut = len(body) - (len(chunk) - end) - len(self.prefix)
        self.write(b"".join((self.prefix, self.partial, memoryview(body)[:cut])))
        self.partial = chunk[end:]

    def flush(self) -> None:
        """At end of output: echo what is left as a final line of its own."""
        if self.partial:
            self._write_lines(self.partial + b"\n")
            self.partial = b""

    def _write_lines(self, lines: bytes) -> None:
        """Complete lines (ending in a newline), escaped unless raw, each prefixed."""
        if self.escape:
            lines = escape_bytes(lines, self.prefix)
        self.write(self.prefix + lines[:-1].replace(b"\n", self.newline_prefix) + b"\n")

    def _keep(self, chunk: bytes) -> None:
        self.partial += chunk
        if len(self.partial) >= MAX_PARTIAL_LINE:  # an overlong line goes out on its own
            self.flush()
