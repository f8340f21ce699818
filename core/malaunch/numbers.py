"""The one integer parser, finite durations, and the limits every input is held to.

Python's ``int()`` accepts far more than a platform variable should hold: ``"1_0"`` is 10,
``" 7 "`` is 7, ``"\u0661"`` (Arabic-Indic one) is 1, and a 5,000-digit string raises past the
interpreter's conversion limit. ``float()`` accepts ``nan`` and ``inf``, with which a grace
period never ends. Every number the launcher reads from a variable, a file or the command line
goes through here instead: ASCII digits only, a bounded length, a documented range.

Limits (SPEC §3: checked before anything is allocated):

==========================  ================================================================
``MAX_LOCAL_PROCESSES``     processes one launcher starts (``--nproc-per-node``, ``MA_NUM_GPUS``,
                            devices of one server, ...): 10,000
``MAX_NODES``               nodes of one job (host lists, node ranks): 100,000
``MAX_WORLD_SIZE``          ranks of one job (nodes x processes per node): 200,000
``MAX_RANK``                a rank in a rank spec (``--console-ranks``): 10,000,000
``MAX_SECONDS``             any duration (``--grace-period``, timeouts): 7 days
``MAX_DIGITS``              digits of any integer: 18
==========================  ================================================================
"""

from __future__ import annotations

import math
from typing import Type

from malaunch.errors import MalaunchError, TopologyError, UsageError

MAX_DIGITS = 18
MAX_LOCAL_PROCESSES = 10_000
MAX_NODES = 100_000
# A topology lists every rank of the job (one model each): 200,000 resolve in about 2 s and
# 200 MB; the 10^9 that the node and per-node maxima allow together would never finish.
MAX_WORLD_SIZE = 200_000
MAX_RANK = 10_000_000
MAX_SECONDS = 7 * 24 * 3600.0


def is_plain_int(text: str) -> bool:
    """ASCII digits only, at most :data:`MAX_DIGITS` of them (no sign, space or underscore)."""
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def parse_int(
    text: str,
    what: str,
    *,
    minimum: int = 0,
    maximum: int = 10**MAX_DIGITS - 1,
    error: Type[MalaunchError] = TopologyError,
) -> int:
    """``text`` as an integer in ``[minimum, maximum]``; ``error`` names ``what`` otherwise.

    ``what`` starts the message (``MA_NUM_GPUS="x"``, ``'1_0'``).
    """
    if not is_plain_int(text) or int(text) < minimum:
        expected = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        msg = f"{what}: expected {expected}"
        raise error(msg)
    value = int(text)
    if value > maximum:
        msg = f"{what}: expected at most {maximum}"
        raise error(msg)
    return value


def parse_seconds(
    text: str,
    what: str,
    *,
    minimum: float = 0.0,
    maximum: float = MAX_SECONDS,
    error: Type[MalaunchError] = UsageError,
) -> float:
    """A finite duration in ``[minimum, maximum]`` seconds (``nan`` and ``inf`` refused; ASCII
    only, no spaces or underscores, which ``float()`` would take)."""
    plain = text.isascii() and text == text.strip() and "_" not in text
    try:
        value = float(text) if plain else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not minimum <= value <= maximum:
        msg = f"{what}: expected a number of seconds from {minimum:g} to {maximum:g}"
        raise error(msg)
    return value


def check_world_size(nodes: int, per_node: int, how: str) -> None:
    """Refuse a job of ``nodes`` x ``per_node`` ranks past :data:`MAX_WORLD_SIZE`, before any
    rank is built; ``how`` names the inputs (``PET_NNODES=8 x PET_NPROC_PER_NODE=4``)."""
    total = nodes * per_node
    if total > MAX_WORLD_SIZE:
        msg = f"{how} gives {total} ranks; at most {MAX_WORLD_SIZE} in one job"
        raise TopologyError(msg)
