"""The slot calendar against a brute-force reference: earliest / latest best-fit queries, insert,
remove, prune and exact snapshot / restore."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.workflows.calendar import Calendar

Booking = tuple[int, int, float, float]  # resource, slot, start, end


def free(bookings: list[Booking], r: int, k: int, s: float, e: float) -> bool:
    return all(not (rr == r and kk == k and a < s + e and b > s) for rr, kk, a, b in bookings)


def brute(bookings: list[Booking], m: int, c: int, t: float, e: float,
          latest_end: float | None) -> tuple[float, int, int] | None:
    """Best (start, resource, slot) by trying every candidate start; None if none fits."""
    if latest_end is None:
        candidates = {t} | {b for *_, b in bookings if b >= t}
    else:
        candidates = {latest_end - e} | {a - e for _, _, a, _ in bookings}
        candidates = {s for s in candidates if t <= s <= latest_end - e}
    best = None
    for r in range(m):
        for s in sorted(candidates, reverse=latest_end is not None):
            slots = [k for k in range(c) if free(bookings, r, k, s, e)]
            if slots:
                key = (s if latest_end is None else -s, len(slots), r)
                if best is None or key < best[0]:
                    best = (key, (s, r, slots[0]))
                break
    return None if best is None else best[1]


@st.composite
def calendars(draw: st.DrawFn) -> tuple[Calendar, list[Booking]]:
    m, c = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    cal, bookings = Calendar(m, c), []
    for key in range(draw(st.integers(0, 12))):
        r, k = draw(st.integers(0, m - 1)), draw(st.integers(0, c - 1))
        s, e = float(draw(st.integers(0, 30))), float(draw(st.integers(1, 8)))
        if free(bookings, r, k, s, e):
            cal.insert(key, r, k, s, e)
            bookings.append((r, k, s, s + e))
    return cal, bookings


@settings(max_examples=300, deadline=None)
@given(calendars(), st.integers(0, 40), st.integers(1, 10), st.integers(0, 20))
def test_queries_match_brute_force(built: tuple[Calendar, list[Booking]], t: int, e: int, slack: int) -> None:
    cal, bookings = built
    assert cal.earliest(float(t), float(e)) == brute(bookings, cal.resources, cal.slots, t, e, None)
    end = float(t + e + slack)
    assert cal.latest(float(t), end, float(e)) == brute(bookings, cal.resources, cal.slots, t, e, end)


@settings(max_examples=200, deadline=None)
@given(calendars(), st.data())
def test_remove_snapshot_restore_and_prune(built: tuple[Calendar, list[Booking]], data: st.DataObject) -> None:
    cal, _ = built
    live = {key: cal.interval(key) for key in range(100) if key in cal}
    before = cal.snapshot()
    for key in data.draw(st.lists(st.sampled_from(sorted(live)), unique=True)) if live else []:
        cal.remove(key)
    cal.insert("x", 0, 0, 1000.0, 5.0)
    cal.restore(before)
    assert cal.snapshot() == before
    assert {key: cal.interval(key) for key in live} == live and "x" not in cal
    now = float(data.draw(st.integers(0, 40)))
    kept = {key: iv for key, iv in live.items() if iv[3] > now}
    assert cal.prune(now) == len(live) - len(kept)
    assert len(cal) == len(kept) and all(key in cal for key in kept)
    rest = [(r, k, s, end) for r, k, s, end in kept.values()]
    t, e = now + data.draw(st.integers(0, 10)), float(data.draw(st.integers(1, 6)))
    assert cal.earliest(t, e) == brute(rest, cal.resources, cal.slots, t, e, None)


def test_latest_never_ends_after_the_bound_despite_rounding() -> None:
    cal = Calendar(1, 1)
    s, _, _ = cal.latest(0.0, 0.3, 0.1) or (math.nan, 0, 0)
    assert s + 0.1 <= 0.3
    cal.insert("a", 0, 0, s, 0.1)


def test_overlapping_names_the_bookings_in_a_window() -> None:
    cal = Calendar(2, 1)
    cal.insert("a", 0, 0, 0.0, 5.0)
    cal.insert("b", 0, 0, 10.0, 5.0)
    cal.insert("c", 1, 0, 4.0, 2.0)
    assert sorted(cal.overlapping(5.0, 9.0)) == ["c"]
    assert sorted(cal.overlapping(3.0, 10.0)) == ["a", "c"]  # b starts at the window's end
    assert sorted(cal.overlapping(3.0, 10.5)) == ["a", "b", "c"]
