"""Fair admission's choice of the connection that makes room, over generated waiting rooms."""

from __future__ import annotations

from typing import List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.job.admission import WaitingRoom

MIN_CHANCE = 0.25

# (source, seconds since the previous connection) in arrival order
arrivals = st.lists(
    st.tuples(st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3"]), st.floats(0.0, 0.2)),
    max_size=40,
)


def room_of(entries: List[Tuple[str, float]]) -> Tuple[WaitingRoom[int], float]:
    room: WaitingRoom[int] = WaitingRoom(capacity=64, min_chance=MIN_CHANCE)
    now = 0.0
    for key, (source, gap) in enumerate(entries):
        now += gap
        room.add(key, source, now)
    return room, now


@settings(derandomize=True, max_examples=300)
@given(arrivals, st.floats(0.0, 2.0))
def test_the_victim_had_its_chance_and_comes_from_the_biggest_holder(
    entries: List[Tuple[str, float]], later: float
) -> None:
    room, now = room_of(entries)
    now += later
    evictable = [k for k, (_, since) in room.waiting.items() if now - since >= MIN_CHANCE]
    victim = room.victim(now)
    if not evictable:
        assert victim is None
        return
    assert victim in evictable
    source = room.waiting[victim][0]
    counts = {room.waiting[k][0]: room.per_source[room.waiting[k][0]] for k in evictable}
    assert counts[source] == max(counts.values())
    # the oldest of its source's evictable ones, and of the first source in age order to hold
    # that many
    assert victim == min(k for k in evictable if room.waiting[k][0] == source)
    tied = [k for k in evictable if counts[room.waiting[k][0]] == counts[source]]
    assert victim == min(tied)


@settings(derandomize=True, max_examples=200)
@given(arrivals, st.data())
def test_removing_keeps_the_counts_true(
    entries: List[Tuple[str, float]], data: st.DataObject
) -> None:
    room, _ = room_of(entries)
    gone = data.draw(st.lists(st.integers(0, max(0, len(entries) - 1)), unique=True))
    for key in gone:
        room.remove(key)
        room.remove(key)  # twice: no harm
    left = [entries[k][0] for k in range(len(entries)) if k not in gone]
    assert len(room) == len(left)
    assert dict(room.per_source) == {s: left.count(s) for s in set(left)}


def test_nothing_is_evicted_before_its_chance_and_the_wait_is_known() -> None:
    room: WaitingRoom[str] = WaitingRoom(capacity=2, min_chance=MIN_CHANCE)
    assert room.next_chance_over() is None
    room.add("a", "10.0.0.1", 1.0)
    room.add("b", "10.0.0.2", 1.1)
    assert room.full()
    assert room.victim(1.2) is None
    assert room.next_chance_over() == 1.25
    assert room.victim(1.25) == "a"


def test_a_flood_from_one_address_evicts_itself_not_the_node() -> None:
    room: WaitingRoom[str] = WaitingRoom(capacity=4, min_chance=MIN_CHANCE)
    room.add("node", "10.0.0.9", 0.0)  # the oldest, but alone at its address
    for index in range(3):
        room.add(f"flood-{index}", "10.0.0.66", 0.1)
    assert room.victim(1.0) == "flood-0"
