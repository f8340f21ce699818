"""How the launcher words what it says: counts, runs of numbers, long values, the name a typo
meant.

One place for each, so that every message counts alike (``1 process``, ``2 processes``),
folds ranks alike (``ranks 0,2-7``), cuts a long value short alike (``'aaa'... (5000
characters)``) and suggests alike (one name when one is close, none when none is).
"""

from __future__ import annotations

import difflib
import re
from typing import Iterable, List, Optional, Sequence

# Nouns whose plural is not the noun + "s".
_IRREGULAR = {
    "process": "processes", "entry": "entries", "retry": "retries", "try": "tries", "is": "are",
}  # fmt: skip
# A name typed is close to a known one when difflib's ratio reaches this, or when one holds
# a word of the other at least _WORD letters long (``pytorch`` holds ``torch`` of torch_ddp).
_CLOSE = 0.75
_WORD = 5
SHOWN_NODES = 8  # nodes named one by one in a wait's line; past it, a count and spans
MAX_SPANS_TEXT = 200  # characters of spans in that line


def plural(count: int, noun: str, plural_form: Optional[str] = None) -> str:
    """``1 file``, ``2 files``, ``0 processes``: a count and its noun, agreed."""
    return f"{count} {noun_for(count, noun, plural_form)}"


def noun_for(count: int, noun: str, plural_form: Optional[str] = None) -> str:
    """``noun`` as ``count`` of it needs: ``rank`` for 1, ``ranks`` otherwise (the last word
    of ``other process`` takes the plural)."""
    if count == 1:
        return noun
    if plural_form is not None:
        return plural_form
    head, space, last = noun.rpartition(" ")
    return f"{head}{space}{_IRREGULAR.get(last, last + 's')}"


def spans(numbers: Iterable[int]) -> str:
    """``0-3,5,7-8``: the numbers sorted, duplicates dropped, runs folded."""
    runs: List[List[int]] = []
    for number in sorted(set(numbers)):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def listing(items: Sequence[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``: names said as a list is said."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def waited_nodes(nodes: Sequence[int]) -> str:
    """``node 1, 2``; past a few, a count and the spans, cut short: a line every 10 s while
    thousands of nodes join (or are told why the job ends) must stay a line (``9,998 nodes:
    1-4211,4213-9999``)."""
    if len(nodes) <= SHOWN_NODES:
        return f"node {', '.join(map(str, nodes))}"
    folded = spans(nodes)
    if len(folded) > MAX_SPANS_TEXT:
        cut = folded.rfind(",", 0, MAX_SPANS_TEXT)  # > 0: no span is 200 characters long
        folded = folded[:cut] + ",..."
    return f"{len(nodes):,} nodes: {folded}"


def shortened(text: str, limit: int = 60, keep: int = 40) -> str:
    """``text`` for a message: itself up to ``limit`` characters, else its first ``keep`` and
    its length (``abc... (5000 characters)``): a 5,000-character value must not make a
    5,000-character line."""
    return text if len(text) <= limit else f"{text[:keep]}... ({len(text)} characters)"


def quoted(text: str, limit: int = 60, keep: int = 60) -> str:
    """``repr(text)`` for a message, cut short as :func:`shortened` cuts (the part kept is
    quoted: ``'abc'... (5000 characters)``)."""
    return repr(text) if len(text) <= limit else f"{text[:keep]!r}... ({len(text)} characters)"


def first_of(items: Sequence[str], shown: int) -> str:
    """``a, b, c, ... (4 more)``: the first ``shown`` of ``items``, and how many more there
    are, so that a message naming thousands of things stays one short line."""
    listed = ", ".join(items[:shown])
    return f"{listed}, ... ({len(items) - shown} more)" if len(items) > shown else listed


def ranks(numbers: Sequence[int], noun: str = "rank") -> str:
    """``rank 3``, ``ranks 0-3,5``: ranks (or nodes) named with their noun."""
    return f"{noun_for(len(set(numbers)), noun)} {spans(numbers)}"


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


def _words(name: str) -> List[str]:
    return [word for word in re.split(r"[^a-z0-9]+", _normal(name)) if len(word) >= _WORD]


def _close(typed: str, known: str) -> bool:
    a, b = _normal(typed), _normal(known)
    if difflib.SequenceMatcher(None, a, b).ratio() >= _CLOSE:
        return True
    return any(word in b for word in _words(a)) or any(word in a for word in _words(b))


def closest(typed: str, names: Iterable[str]) -> Optional[str]:
    """The one known name ``typed`` most likely meant, or None when none is close.

    Case and ``_`` against ``-`` are ignored (``--nproc_per_node`` is ``--nproc-per-node``);
    among close names the most similar wins, so there is never more than one suggestion, and
    none when two are equally close.
    """
    candidates = [name for name in dict.fromkeys(names) if name != typed and _close(typed, name)]
    if not candidates:
        return None
    typed_normal = _normal(typed)

    def similarity(name: str) -> float:
        return difflib.SequenceMatcher(None, typed_normal, _normal(name)).ratio()

    ranked = sorted(candidates, key=similarity, reverse=True)
    if len(ranked) > 1 and similarity(ranked[0]) == similarity(ranked[1]):
        return None  # --timeout: --hang-timeout or --wait-timeout? Naming one would mislead.
    return ranked[0]


def did_you_mean(typed: str, names: Iterable[str], shown: str = "{}") -> str:
    """`` (did you mean X?)`` for the closest name, ``shown`` formatting it; else ``""``."""
    found = closest(typed, names)
    return f" (did you mean {shown.format(found)}?)" if found is not None else ""
