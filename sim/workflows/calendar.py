"""Slot calendar of RM-DCWF's resources: m resources × c_r slots, each slot a sorted list of
planned half-open intervals ``[start, end)``.

Queries bisect into the per-slot lists (no scan over every planned task) and stop walking a slot
once it cannot beat the best answer so far; :meth:`Calendar.prune` drops what ended in the past
so memory follows the active plan. Zero-length tasks never enter the calendar.

Cost: a slot's intervals are also kept as *runs* (maximal chains where each interval starts
exactly where the previous one ends), and a query walks runs instead of intervals whenever the
duration is at least one ulp of the latest planned end, which makes every boundary inside a run
impassable exactly as the interval walk would find it (so the answer is the interval walk's, bit
for bit). Only resources with a planned interval are visited (an empty resource answers every query
the same way; the lowest-numbered one stands for all). A query costs a bisection and a walk over the
runs up to a fitting gap per slot in use, instead of a walk over every planned interval: placing
the tasks of a wide fan-out one by one is linear in its tasks, not quadratic.

Most queries are answered at the very time asked (``t`` for :meth:`Calendar.earliest`; for
:meth:`Calendar.latest` the latest start that ends by ``end``): some slot is free around it. So a
query first asks only that — one bisection per slot, lowest resource first, until a resource with a
single such slot (nothing after it can fit better) — and walks only when no slot is free then.
Both give the walk's answer: a slot free at the time asked is exactly one whose walk stops there.

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
from bisect import bisect_left, bisect_right, insort
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class CalendarState:
    """An exact copy of a calendar's contents (see :meth:`Calendar.snapshot`): per non-empty slot
    ``(slot index, starts, ends, keys)``, in slot order. ``runs`` (per slot, its runs) and ``where``
    (key → slot index and start) are derived from ``slots``, kept so that a restore copies instead of
    recomputing; they take no part in comparisons."""

    slots: tuple[tuple[int, tuple[float, ...], tuple[float, ...], tuple[Hashable, ...]], ...]
    runs: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...] = field(default=(), compare=False, repr=False)
    where: dict[Hashable, tuple[int, float]] | None = field(default=None, compare=False, repr=False)


class _Slot:
    """One slot's intervals (parallel sorted lists) and their runs (``run_starts``, ``run_ends``)."""

    __slots__ = ("ends", "keys", "run_ends", "run_starts", "starts")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.keys: list[Hashable] = []
        self.run_starts: list[float] = []
        self.run_ends: list[float] = []

    def insert(self, k: int, key: Hashable, start: float, end: float) -> None:
        """Put ``[start, end)`` at position ``k`` (free, checked by the caller) and merge touching runs."""
        starts, ends, run_starts, run_ends = self.starts, self.ends, self.run_starts, self.run_ends
        left = k > 0 and ends[k - 1] == start
        right = k < len(starts) and starts[k] == end
        inside = left and right and start == end  # a zero-length interval where two intervals touch
        starts.insert(k, start)
        ends.insert(k, end)
        self.keys.insert(k, key)
        if inside:
            return
        if left:
            q = bisect_left(run_ends, start)
            if right:
                run_ends[q] = run_ends[q + 1]
                del run_starts[q + 1], run_ends[q + 1]
            else:
                run_ends[q] = end
        elif right:
            run_starts[bisect_left(run_starts, end)] = start
        else:
            q = bisect_left(run_starts, start)
            run_starts.insert(q, start)
            run_ends.insert(q, end)

    def index(self, key: Hashable, start: float) -> int:
        """The position of the interval ``key`` that starts at ``start`` (a zero-length one may share its start)."""
        k = bisect_left(self.starts, start)
        while self.keys[k] != key:
            k += 1
        return k

    def remove(self, k: int) -> None:
        """Drop interval ``k`` and split its run around it."""
        starts, ends, run_starts, run_ends = self.starts, self.ends, self.run_starts, self.run_ends
        start, end = starts[k], ends[k]
        head = k > 0 and ends[k - 1] == start
        tail = k + 1 < len(starts) and starts[k + 1] == end
        del starts[k], ends[k], self.keys[k]
        if head and tail and start == end:
            return  # its neighbours still touch
        q = bisect_right(run_starts, start) - 1
        if head and tail:
            run_starts.insert(q + 1, end)
            run_ends.insert(q + 1, run_ends[q])
            run_ends[q] = start
        elif head:
            run_ends[q] = start
        elif tail:
            run_starts[q] = end
        else:
            del run_starts[q], run_ends[q]

    def drop_until(self, now: float) -> list[Hashable]:
        """Drop the intervals that ended at or before ``now``; their keys."""
        k = bisect_right(self.ends, now)
        dropped = self.keys[:k]
        del self.starts[:k], self.ends[:k], self.keys[:k]
        q = bisect_right(self.run_ends, now)
        del self.run_starts[:q], self.run_ends[:q]
        if self.starts:
            self.run_starts[0] = self.starts[0]
        return dropped

    def rebuild_runs(self) -> None:
        """Recompute the runs from the intervals."""
        self.run_starts, self.run_ends = [], []
        for start, end in zip(self.starts, self.ends, strict=True):
            if self.run_ends and self.run_ends[-1] == start:
                self.run_ends[-1] = end
            else:
                self.run_starts.append(start)
                self.run_ends.append(end)


class Calendar:
    """Planned task intervals of ``resources`` × ``slots``; a key names each interval."""

    def __init__(self, resources: int, slots: int) -> None:
        self.resources = resources
        self.slots = slots
        #: resource → its non-empty slots (slot index → _Slot); ``_busy`` lists those resources in order
        self._rows: dict[int, dict[int, _Slot]] = {}
        self._busy: list[int] = []
        #: resource in use → ``(slot index, starts, ends)`` of its non-empty slots in slot order (what the
        #: queries read; the lists are the slots' own)
        self._cols: dict[int, list[tuple[int, list[float], list[float]]]] = {}
        self._where: dict[Hashable, tuple[int, float]] = {}
        #: the latest end ever planned and one ulp of it: a duration at least that long may walk runs
        self._horizon, self._ulp = -math.inf, 0.0

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._where

    def _first_empty(self) -> int:
        """The lowest-numbered resource without a planned interval (``resources`` if none)."""
        busy, lo, hi = self._busy, 0, len(self._busy)
        if not hi or busy[-1] == hi - 1:  # resources 0..hi−1 are busy (all of them, or none)
            return hi
        while lo < hi:  # busy[i] == i exactly on a prefix
            mid = (lo + hi) // 2
            if busy[mid] == mid:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _lowest_slot(self, r: int, start: float, free_at: float, choice: int) -> int:
        """Slot ``choice`` of resource ``r``, or its lowest empty slot when that starts at ``start`` too."""
        row = self._rows.get(r, {})
        if start != free_at or len(row) == self.slots:
            return choice
        empty = next(k for k in range(self.slots) if k not in row)
        return empty if choice < 0 else min(empty, choice)

    def _free(self, t: float, x: float) -> tuple[int, int] | None:
        """Best ``(resource, slot)`` among the slots free over ``[t, x)`` (no interval ends after ``t``
        and starts before ``x``): the fewest such slots in the resource, then the lowest resource and
        slot; ``None`` if no slot is. For ``x = t + e`` these are the slots whose walk in
        :meth:`earliest` stays at ``t``; for ``t = top`` and ``x = end``, those whose walk in
        :meth:`latest` stays at ``top``."""
        c = self.slots
        best_fit, best_r, best_k = c + 1, -1, -1
        first_empty = self._first_empty()
        if first_empty < self.resources:
            best_fit, best_r = c, first_empty
        cols_of = self._cols
        for r in self._busy:
            if best_fit == 1 and r > best_r:
                break  # nothing later can beat it
            cols = cols_of[r]
            fit, first = c - len(cols), -1
            for k, starts, ends in cols:
                j = bisect_right(ends, t)
                if j == len(ends) or starts[j] >= x:
                    fit += 1
                    if first < 0:
                        first = k
            if fit and (fit < best_fit or (fit == best_fit and r < best_r)):
                best_fit, best_r, best_k = fit, r, first
        if best_r < 0:
            return None
        return best_r, self._lowest_slot(best_r, t, t, best_k)

    def earliest(self, t: float, e: float) -> tuple[float, int, int]:
        """Best ``(start, resource, slot)`` for a task of duration ``e`` > 0 starting at or after ``t``.

        Best: the earliest start, then the resource with the fewest slots that could take the task
        at that start (best fit), then the lowest resource and slot index.
        """
        found = self._free(t, t + e)
        if found is not None:
            return t, found[0], found[1]
        c, runs = self.slots, e >= self._ulp
        best, best_fit, best_r, best_k = math.inf, c + 1, -1, -1
        first_empty = self._first_empty()
        if first_empty < self.resources:
            best, best_fit, best_r = t, c, first_empty
        for r in self._busy:
            if best == t and best_fit == 1 and r > best_r:
                break  # nothing later can beat it
            row = self._rows[r]
            empty = c - len(row)
            r_start, fit, r_slot = (t, empty, -1) if empty else (math.inf, 0, -1)
            for k, slot in row.items():
                starts, ends = (slot.run_starts, slot.run_ends) if runs else (slot.starts, slot.ends)
                j, n, s = bisect_right(ends, t), len(ends), t
                while j < n and starts[j] < s + e and s <= best:
                    if ends[j] > s:
                        s = ends[j]
                    j += 1
                if s < r_start:
                    r_start, fit, r_slot = s, 1, k
                elif s == r_start:
                    fit += 1
                    if r_slot < 0 or k < r_slot:
                        r_slot = k
            if r_start < best or (r_start == best and (fit < best_fit or (fit == best_fit and r < best_r))):
                best, best_fit, best_r, best_k = r_start, fit, r, r_slot
        return best, best_r, self._lowest_slot(best_r, best, t, best_k)

    def latest(self, lo: float, end: float, e: float) -> tuple[float, int, int] | None:
        """Best ``(start, resource, slot)`` for a task of duration ``e`` > 0 starting in ``[lo, end − e]``
        (``None`` if it fits nowhere): the latest start, then best fit, then the lowest indices."""
        top = _start_before(end, e)
        if top < lo:
            return None
        found = self._free(top, end)
        if found is not None:
            return top, found[0], found[1]
        c, runs = self.slots, e >= self._ulp
        best, best_fit, best_r, best_k = -math.inf, c + 1, -1, -1
        first_empty = self._first_empty()
        if first_empty < self.resources:
            best, best_fit, best_r = top, c, first_empty
        for r in self._busy:
            if best == top and best_fit == 1 and r > best_r:
                break
            row = self._rows[r]
            empty = c - len(row)
            r_start, fit, r_slot = (top, empty, -1) if empty else (-math.inf, 0, -1)
            for k, slot in row.items():
                starts, ends = (slot.run_starts, slot.run_ends) if runs else (slot.starts, slot.ends)
                j, s = bisect_left(starts, end) - 1, top
                while j >= 0 and ends[j] > s:
                    s = _start_before(starts[j], e)
                    if s < lo or s < best:
                        s = -math.inf
                        break
                    j -= 1
                if s > r_start:
                    r_start, fit, r_slot = s, 1, k
                elif s == r_start and s > -math.inf:
                    fit += 1
                    if r_slot < 0 or k < r_slot:
                        r_slot = k
            if r_start > best or (r_start == best and r_start > -math.inf
                                  and (fit < best_fit or (fit == best_fit and r < best_r))):
                best, best_fit, best_r, best_k = r_start, fit, r, r_slot
        if best < lo:
            return None
        return best, best_r, self._lowest_slot(best_r, best, top, best_k)

    def insert(self, key: Hashable, r: int, slot: int, start: float, e: float) -> None:
        """Book ``[start, start + e)`` on slot ``slot`` of resource ``r``; raises if it overlaps."""
        row = self._rows.get(r)
        booked = row.get(slot) if row is not None else None
        end = start + e
        k = bisect_right(booked.starts, start) if booked is not None else 0
        if key in self._where or (booked is not None and (
                (k and booked.ends[k - 1] > start) or (k < len(booked.starts) and booked.starts[k] < end))):
            raise ValueError(f"calendar: cannot book {key!r} at [{start}, {end}) on resource {r} slot {slot}")
        if row is None:
            row = self._rows[r] = {}
            insort(self._busy, r)
        if booked is None:
            booked = row[slot] = _Slot()
            self._cols[r] = _columns(row)
        booked.insert(k, key, start, end)
        self._where[key] = (r * self.slots + slot, start)
        if end > self._horizon:
            self._horizon, self._ulp = end, max(self._ulp, math.ulp(end))

    def _slot(self, i: int) -> _Slot:
        return self._rows[i // self.slots][i % self.slots]

    def _release(self, i: int) -> None:
        """Forget slot ``i`` if it became empty, and its resource if that did."""
        r, k = divmod(i, self.slots)
        row = self._rows[r]
        if not row[k].starts:
            del row[k]
            if row:
                self._cols[r] = _columns(row)
            else:
                del self._rows[r], self._cols[r]
                del self._busy[bisect_left(self._busy, r)]

    def remove(self, key: Hashable) -> None:
        """Free the interval booked under ``key``."""
        i, start = self._where.pop(key)
        slot = self._slot(i)
        slot.remove(slot.index(key, start))
        self._release(i)

    def interval(self, key: Hashable) -> tuple[int, int, float, float]:
        """``(resource, slot, start, end)`` of a booking."""
        i, start = self._where[key]
        slot = self._slot(i)
        return i // self.slots, i % self.slots, start, slot.ends[slot.index(key, start)]

    def _in_order(self) -> Iterator[tuple[int, _Slot]]:
        """``(slot index, slot)`` of every non-empty slot, in (resource, slot) order."""
        for r in self._busy:
            row = self._rows[r]
            for k in sorted(row):
                yield r * self.slots + k, row[k]

    def overlapping(self, lo: float, hi: float) -> Iterator[Hashable]:
        """Keys of the intervals ``[a, b)`` with ``a < hi`` and ``b > lo`` (resource, slot, time order)."""
        for _, slot in list(self._in_order()):
            keys = slot.keys
            for k in range(bisect_right(slot.ends, lo), bisect_left(slot.starts, hi)):
                yield keys[k]

    def prune(self, now: float) -> int:
        """Forget the intervals that ended at or before ``now``; returns how many."""
        dropped, where = 0, self._where
        for r, row in list(self._rows.items()):
            for k, slot in list(row.items()):
                if slot.ends[0] <= now:
                    keys = slot.drop_until(now)
                    for key in keys:
                        del where[key]
                    dropped += len(keys)
                    self._release(r * self.slots + k)
        return dropped

    def snapshot(self) -> CalendarState:
        """An exact copy of the contents, for :meth:`restore` (and for comparing two plans)."""
        slots = list(self._in_order())
        return CalendarState(tuple((i, tuple(s.starts), tuple(s.ends), tuple(s.keys)) for i, s in slots),
                             tuple((tuple(s.run_starts), tuple(s.run_ends)) for _, s in slots), dict(self._where))

    def restore(self, state: CalendarState) -> None:
        """Put the calendar back exactly as it was at :meth:`snapshot`."""
        self._rows, where = {}, state.where
        copied = where is not None and len(state.runs) == len(state.slots)  # else derive them
        self._where = dict(where) if where is not None and copied else {}
        for n, (i, starts, ends, keys) in enumerate(state.slots):
            slot = self._rows.setdefault(i // self.slots, {})[i % self.slots] = _Slot()
            slot.starts, slot.ends, slot.keys = list(starts), list(ends), list(keys)
            if copied:
                slot.run_starts, slot.run_ends = list(state.runs[n][0]), list(state.runs[n][1])
            else:
                slot.rebuild_runs()
                self._where.update((key, (i, start)) for key, start in zip(keys, starts, strict=True))
            if ends[-1] > self._horizon:
                self._horizon, self._ulp = ends[-1], max(self._ulp, math.ulp(ends[-1]))
        self._busy = sorted(self._rows)
        self._cols = {r: _columns(row) for r, row in self._rows.items()}


def _columns(row: dict[int, _Slot]) -> list[tuple[int, list[float], list[float]]]:
    """``(slot index, starts, ends)`` of a resource's non-empty slots, in slot order (the lists
    themselves: they change in place)."""
    return [(k, row[k].starts, row[k].ends) for k in sorted(row)]


def _start_before(end: float, e: float) -> float:
    """The largest float s with ``s + e <= end`` (plain ``end − e`` can round one ulp too late)."""
    s = end - e
    while s + e > end:
        s = math.nextafter(s, -math.inf)
    return s
