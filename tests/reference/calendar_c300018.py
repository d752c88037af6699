"""Main c300018's ``sim/workflows/calendar.py``, kept verbatim as the speed and identity baseline
(``tests/test_rmdcwf_calendar_identity.py``, ``tests/bench/bench_workflows.py --only calendar``).

Slot calendar of RM-DCWF's resources: m resources × c_r slots, each slot a sorted list of
planned half-open intervals ``[start, end)``.

Queries bisect into the per-slot lists (no scan over every planned task) and stop walking a slot
once it cannot beat the best answer so far; :meth:`Calendar.prune` drops what ended in the past
so memory follows the active plan. Zero-length tasks never enter the calendar.

>>> cal = Calendar(2, 2)
>>> cal.insert("a", 0, 0, 0.0, 10.0)
>>> cal.earliest(0.0, 5.0)  # resource 0 slot 1 is free and leaves no slot idle: best fit
(0.0, 0, 1)
>>> cal.insert("b", 0, 1, 0.0, 4.0)
>>> cal.earliest(0.0, 5.0), cal.latest(0.0, 20.0, 5.0)
((0.0, 1, 0), (15.0, 0, 0))
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

    def earliest(self, t: float, e: float) -> tuple[float, int, int]:
        """Best ``(start, resource, slot)`` for a task of duration ``e`` > 0 starting at or after ``t``.

        Best: the earliest start, then the resource with the fewest slots that could take the task
        at that start (best fit), then the lowest resource and slot index.
        """
        starts_of, ends_of, c, load = self._starts, self._ends, self.slots, self.load
        best, best_fit, best_r, best_k = math.inf, c + 1, -1, -1
        seen_empty = False
        for r in range(self.resources):
            if not load[r]:
                if not seen_empty:  # every empty resource answers (t, all slots); the first one wins ties
                    seen_empty = True
                    if t < best or (t == best and c < best_fit):
                        best, best_fit, best_r, best_k = t, c, r, 0
                continue
            r_start, fit, r_slot = math.inf, 0, -1
            for k in range(c):
                ends = ends_of[r * c + k]
                j, n, s = bisect_right(ends, t), len(ends), t
                if j < n:
                    starts = starts_of[r * c + k]
                    while j < n and starts[j] < s + e and s <= best:
                        if ends[j] > s:
                            s = ends[j]
                        j += 1
                if s < r_start:
                    r_start, fit, r_slot = s, 1, k
                elif s == r_start:
                    fit += 1
            if r_start < best or (r_start == best and fit < best_fit):
                best, best_fit, best_r, best_k = r_start, fit, r, r_slot
                if best == t and fit == 1:
                    break  # nothing can beat it
        return best, best_r, best_k

    def latest(self, lo: float, end: float, e: float) -> tuple[float, int, int] | None:
        """Best ``(start, resource, slot)`` for a task of duration ``e`` > 0 starting in ``[lo, end − e]``
        (``None`` if it fits nowhere): the latest start, then best fit, then the lowest indices."""
        starts_of, ends_of, c, load = self._starts, self._ends, self.slots, self.load
        top = _start_before(end, e)
        best, best_fit, best_r, best_k = -math.inf, c + 1, -1, -1
        seen_empty = False
        for r in range(self.resources):
            if not load[r]:
                if not seen_empty:
                    seen_empty = True
                    if top > best or (top == best and c < best_fit):
                        best, best_fit, best_r, best_k = top, c, r, 0
                continue
            r_start, fit, r_slot = -math.inf, 0, -1
            for k in range(c):
                starts, ends = starts_of[r * c + k], ends_of[r * c + k]
                j, bound, s = bisect_left(starts, end) - 1, end, top
                while j >= 0 and ends[j] > s:
                    bound = starts[j]
                    s = _start_before(bound, e)
                    if s < lo or s < best:
                        s = -math.inf
                        break
                    j -= 1
                if s > r_start:
                    r_start, fit, r_slot = s, 1, k
                elif s == r_start and s > -math.inf:
                    fit += 1
            if r_start > best or (r_start == best and r_start > -math.inf and fit < best_fit):
                best, best_fit, best_r, best_k = r_start, fit, r, r_slot
                if best == top and fit == 1:
                    break
        if best < lo:
            return None
        return best, best_r, best_k

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
        """Keys of the intervals ``[a, b)`` with ``a < hi`` and ``b > lo`` (resource, slot, time order)."""
        for i, starts in enumerate(self._starts):
            ends, keys = self._ends[i], self._keys[i]
            for k in range(bisect_right(ends, lo), bisect_left(starts, hi)):
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
