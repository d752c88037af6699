"""Slot calendar of RM-DCWF's resources: m resources × c_r slots, each slot a sorted list of
planned half-open intervals ``[start, end)``.

Queries bisect into the per-slot lists (no scan over every planned task); :meth:`Calendar.prune`
drops what ended in the past so memory follows the active plan. A resource's answer covers all
its slots: the best start, the lowest slot index giving it, and how many of its slots give it
(``fit`` — the planner's best-fit key). Zero-length tasks never enter the calendar.

>>> cal = Calendar(1, 2)
>>> cal.insert("a", 0, 0, 0.0, 10.0)
>>> cal.earliest(0, 0.0, 5.0)
(0.0, 1, 1)
>>> cal.insert("b", 0, 1, 0.0, 4.0)
>>> cal.earliest(0, 0.0, 5.0), cal.latest(0, 0.0, 20.0, 5.0)
((4.0, 1, 1), (15.0, 0, 2))
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CalendarState:
    """An exact copy of a calendar's contents (see :meth:`Calendar.snapshot`)."""

    starts: tuple[tuple[float, ...], ...]
    ends: tuple[tuple[float, ...], ...]
    keys: tuple[tuple[Hashable, ...], ...]


class Calendar:
    """Planned task intervals of ``resources`` × ``slots``; a key names each interval."""

    def __init__(self, resources: int, slots: int) -> None:
        self.resources = resources
        self.slots = slots
        n = resources * slots
        self._starts: list[list[float]] = [[] for _ in range(n)]
        self._ends: list[list[float]] = [[] for _ in range(n)]
        self._keys: list[list[Hashable]] = [[] for _ in range(n)]
        self._where: dict[Hashable, tuple[int, float]] = {}
        #: planned intervals per resource (an empty resource answers every query trivially)
        self.load = [0] * resources

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._where

    def _slot_earliest(self, i: int, t: float, e: float) -> float:
        starts, ends = self._starts[i], self._ends[i]
        s = t
        for k in range(bisect_right(ends, t), len(starts)):
            if starts[k] >= s + e:
                break
            s = max(s, ends[k])
        return s

    def _slot_latest(self, i: int, lo: float, end: float, e: float) -> float:
        starts, ends = self._starts[i], self._ends[i]
        for k in range(bisect_left(starts, end) - 1, -1, -1):
            s = _start_before(end, e)
            if s < lo:
                return -math.inf
            if ends[k] <= s:
                return s
            end = min(end, starts[k])
        s = _start_before(end, e)
        return s if s >= lo else -math.inf

    def earliest(self, r: int, t: float, e: float) -> tuple[float, int, int]:
        """Earliest start ≥ ``t`` for duration ``e`` > 0 on resource ``r``: ``(start, slot, fit)``."""
        if not self.load[r]:
            return t, 0, self.slots
        base = r * self.slots
        best, slot, fit = math.inf, -1, 0
        for k in range(self.slots):
            s = self._slot_earliest(base + k, t, e)
            if s < best:
                best, slot, fit = s, k, 1
            elif s == best:
                fit += 1
        return best, slot, fit

    def latest(self, r: int, lo: float, end: float, e: float) -> tuple[float, int, int] | None:
        """Latest start in ``[lo, end − e]`` for duration ``e`` > 0 on resource ``r`` (``None`` if none)."""
        if not self.load[r]:
            s = _start_before(end, e)
            return (s, 0, self.slots) if s >= lo else None
        base = r * self.slots
        best, slot, fit = -math.inf, -1, 0
        for k in range(self.slots):
            s = self._slot_latest(base + k, lo, end, e)
            if s > best:
                best, slot, fit = s, k, 1
            elif s == best:
                fit += 1
        return (best, slot, fit) if best > -math.inf else None

    def insert(self, key: Hashable, r: int, slot: int, start: float, e: float) -> None:
        """Book ``[start, start + e)`` on slot ``slot`` of resource ``r``; raises if it overlaps."""
        i = r * self.slots + slot
        starts, ends = self._starts[i], self._ends[i]
        k = bisect_right(starts, start)
        end = start + e
        if key in self._where or (k and ends[k - 1] > start) or (k < len(starts) and starts[k] < end):
            raise ValueError(f"calendar: cannot book {key!r} at [{start}, {end}) on resource {r} slot {slot}")
        starts.insert(k, start)
        ends.insert(k, end)
        self._keys[i].insert(k, key)
        self._where[key] = (i, start)
        self.load[r] += 1

    def remove(self, key: Hashable) -> None:
        """Free the interval booked under ``key``."""
        i, start = self._where.pop(key)
        k = bisect_left(self._starts[i], start)
        del self._starts[i][k], self._ends[i][k], self._keys[i][k]
        self.load[i // self.slots] -= 1

    def interval(self, key: Hashable) -> tuple[int, int, float, float]:
        """``(resource, slot, start, end)`` of a booking."""
        i, start = self._where[key]
        k = bisect_left(self._starts[i], start)
        return i // self.slots, i % self.slots, start, self._ends[i][k]

    def overlapping(self, lo: float, hi: float) -> Iterator[Hashable]:
        """Keys of the intervals that intersect ``[lo, hi]`` (resource, then slot, then time order)."""
        for i, starts in enumerate(self._starts):
            ends, keys = self._ends[i], self._keys[i]
            for k in range(bisect_right(ends, lo), bisect_right(starts, hi)):
                yield keys[k]

    def prune(self, now: float) -> int:
        """Forget the intervals that ended at or before ``now``; returns how many."""
        dropped = 0
        for i, ends in enumerate(self._ends):
            k = bisect_right(ends, now)
            if k:
                for key in self._keys[i][:k]:
                    del self._where[key]
                del self._starts[i][:k], ends[:k], self._keys[i][:k]
                self.load[i // self.slots] -= k
                dropped += k
        return dropped

    def snapshot(self) -> CalendarState:
        """An exact copy of the contents, for :meth:`restore` (and for comparing two plans)."""
        return CalendarState(tuple(map(tuple, self._starts)), tuple(map(tuple, self._ends)),
                             tuple(map(tuple, self._keys)))

    def restore(self, state: CalendarState) -> None:
        """Put the calendar back exactly as it was at :meth:`snapshot`."""
        self._starts = [list(s) for s in state.starts]
        self._ends = [list(e) for e in state.ends]
        self._keys = [list(k) for k in state.keys]
        self._where = {key: (i, self._starts[i][k]) for i, keys in enumerate(self._keys) for k, key in enumerate(keys)}
        self.load = [sum(len(s) for s in self._starts[r * self.slots:(r + 1) * self.slots])
                     for r in range(self.resources)]


def _start_before(end: float, e: float) -> float:
    """The largest float s with ``s + e <= end`` (plain ``end − e`` can round one ulp too late)."""
    s = end - e
    while s + e > end:
        s = math.nextafter(s, -math.inf)
    return s
