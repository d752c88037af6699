"""Task placement of RM-DCWF (Alg. 5, mapJobHelper): one task on the best resource, and the
list-scheduling sweep that maps the tasks of one workflow onto a :class:`Calendar`.

Resource choice (:meth:`Calendar.earliest` / :meth:`Calendar.latest`): the start the policy asks
for (TSP1: earliest; TSP2: latest that still ends by the sub-deadline), then best fit — the
resource with the fewest slots that could take the task at that start — then the lowest index.
Zero-length tasks take no slot.
"""

from __future__ import annotations

from collections.abc import Container, Hashable, Mapping, Sequence
from dataclasses import dataclass

from sim.workflows.calendar import Calendar


@dataclass(frozen=True, slots=True)
class Placement:
    """Where and when a task is planned; ``resource == -1`` for a zero-length task (no slot)."""

    start: float
    end: float
    resource: int
    slot: int


def place_earliest(cal: Calendar, e: float, est: float) -> Placement:
    """TSP1: the earliest start ≥ ``est`` (then best fit, then lowest index)."""
    if e == 0:
        return Placement(est, est, -1, -1)
    s, r, k = cal.earliest(est, e)
    return Placement(s, s + e, r, k)


def place_latest(cal: Calendar, e: float, est: float, end_by: float) -> Placement:
    """TSP2: the latest start in ``[est, end_by − e]`` (then best fit, then lowest index); the TSP1
    placement when no resource can meet ``end_by``."""
    if e == 0:
        s = max(est, end_by)
        return Placement(s, s, -1, -1)
    found = cal.latest(est, end_by, e)
    if found is None:
        return place_earliest(cal, e, est)
    s, r, k = found
    return Placement(s, s + e, r, k)


def map_tasks(
    cal: Calendar,
    keys: Sequence[Hashable],
    runtimes: Sequence[float],
    parents: Sequence[Sequence[int]],
    order: Sequence[int],
    floor: float,
    finished: Mapping[int, float] | None = None,
    end_by: Sequence[float] | None = None,
    bound: Sequence[float] | None = None,
) -> dict[int, Placement] | None:
    """Map the tasks in ``order`` (local indices) and book them in ``cal`` under ``keys[t]``.

    Tasks are swept in ``order`` repeatedly, skipping a task until its parents are placed (the order
    :func:`sweep_order` computes without sweeping); a task's earliest start is ``max(floor, parents'
    completions)``; ``finished`` gives the completions of tasks that are not mapped here (already
    started). With ``end_by`` (per-task sub-deadlines) a task is placed by TSP2, else by TSP1. With
    ``bound`` (deadline check) the first task ending after its bound undoes this call's bookings and
    ``None`` is returned.
    """
    finish: dict[int, float] = dict(finished or {})
    placed: dict[int, Placement] = {}
    for t in sweep_order(parents, order, finish):
        est = floor  # max(floor, parents' completions), the first of equals as max() keeps it
        for q in parents[t]:
            if finish[q] > est:
                est = finish[q]
        e = runtimes[t]
        p = place_earliest(cal, e, est) if end_by is None else place_latest(cal, e, est, end_by[t])
        if bound is not None and p.end > bound[t]:
            for u, done in placed.items():
                if done.resource >= 0:
                    cal.remove(keys[u])
            return None
        if p.resource >= 0:
            cal.insert(keys[t], p.resource, p.slot, p.start, e)
        placed[t] = p
        finish[t] = p.end
    return placed


def sweep_order(parents: Sequence[Sequence[int]], order: Sequence[int], done: Container[int]) -> list[int]:
    """The tasks of ``order`` in the order repeated sweeps over it place them, computed in O(n log n).

    A sweep visits ``order`` front to back and places each task whose parents are placed or ``done``;
    so task t goes in sweep ``max(1, max over parents q of sweep(q) + [q comes after t in order])`` and
    the placements are sorted by (sweep, position). Raises ``ValueError`` for a parent that is neither
    in ``order`` nor ``done``.

    >>> sweep_order([[], [0], [1]], [2, 1, 0], ())  # one task per sweep: 0, then 1, then 2
    [0, 1, 2]
    """
    position = {t: i for i, t in enumerate(order)}
    children: dict[int, list[int]] = {}
    waiting: dict[int, int] = {}
    sweep: dict[int, int] = {}
    for t in order:
        count = 0
        for p in set(parents[t]):
            if p in done:
                continue
            if p not in position:
                raise ValueError(f"task {t} waits for parent {p}, which is neither mapped nor finished")
            children.setdefault(p, []).append(t)
            count += 1
        if count:
            waiting[t] = count
        else:
            sweep[t] = 1
    ready = list(sweep)
    while ready:
        p = ready.pop()
        for t in children.get(p, ()):
            sweep[t] = max(sweep.get(t, 1), sweep[p] + (position[p] > position[t]))
            waiting[t] -= 1
            if not waiting[t]:
                ready.append(t)
    if len(sweep) < len(order):
        raise ValueError(f"tasks {[t for t in order if t not in sweep][:5]} wait for each other (a cycle)")
    return sorted(order, key=sweep.__getitem__)  # stable: by sweep, then position in order
