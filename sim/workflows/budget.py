"""Deadline budgeting of RM-DCWF (DBW, Alg. 1–3): the SET schedules, laxity (Eq. 1), phase
laxities (PD / ED) and task sub-deadlines (Eq. 2 plus the multi-parent rule).

:func:`alone_schedule` is the one SET^R routine: the generators draw deadlines with it and the
policy budgets with it, so both agree on SET^R to the bit.

>>> alone_schedule([5.0, 3.0, 2.0], [[], [0], [0]], machines=1, slots=1, start=10.0)
[15.0, 18.0, 20.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from sim.workflows.calendar import Calendar
from sim.workflows.mapping import map_tasks

#: how a parent of a multi-parent task is lifted (:func:`sub_deadlines`); the default first
MultiParent = Literal["align", "latest_start", "none"]


def mapping_order(runtimes: Sequence[float], sub_deadlines: Sequence[float] | None = None) -> list[int]:
    """Alg. 5's task order: non-increasing run time, then earlier sub-deadline, then smaller index.

    >>> mapping_order([1.0, 4.0, 4.0, 2.0], [0.0, 9.0, 8.0, 0.0])
    [2, 1, 3, 0]
    """
    sd = sub_deadlines if sub_deadlines is not None else [0.0] * len(runtimes)
    return sorted(range(len(runtimes)), key=lambda t: (-runtimes[t], sd[t], t))


def alone_schedule(runtimes: Sequence[float], parents: Sequence[Sequence[int]], machines: int, slots: int,
                   start: float) -> list[float]:
    """Planned completion of each task when the workflow is list-scheduled (TSP1, best fit) alone
    on an empty ``machines`` × ``slots`` system from ``start`` (SET^R: :func:`schedule_length`)."""
    placed = map_tasks(Calendar(machines, slots), range(len(runtimes)), runtimes, parents,
                       mapping_order(runtimes), start)
    assert placed is not None
    return [placed[t].end for t in range(len(runtimes))]


def schedule_length(finish: Sequence[float], start: float) -> float:
    """A schedule's length from its task completions: SET^R for :func:`alone_schedule`'s (0 without tasks).

    >>> schedule_length([15.0, 18.0, 17.0], 10.0), schedule_length([], 10.0)
    (8.0, 0.0)
    """
    return max(finish, default=start) - start


def laxity(deadline: float, start: float, set_length: float) -> float:
    """Eq. 1: ``L_j = d_j − s_j − SET_j`` (signed: negative when the SET schedule already misses d_j)."""
    return deadline - start - set_length


def phase_laxities(lax: float, phase: Sequence[int], runtimes: Sequence[float], finish: Sequence[float],
                   start: float, distribution: str = "pd", phase_length: str = "span") -> list[float]:
    """Laxity share of each phase 1..P (index 0 = phase 1).

    ``ed``: L/P each. ``pd``: L · ET_p / Σ ET_q with ET_p = (``span``) the latest completion in phase p
    minus the latest completion in phase p−1 (phase 0 ends at ``start``), or (``max_task``) the
    longest task in phase p. Equal shares when Σ ET_q = 0.

    >>> phase_laxities(12.0, [1, 2, 2], [2.0, 3.0, 1.0], [2.0, 5.0, 3.0], 0.0)
    [4.8, 7.2]
    >>> phase_laxities(12.0, [1, 2, 2], [2.0, 3.0, 1.0], [2.0, 5.0, 3.0], 0.0, "ed")
    [6.0, 6.0]
    """
    count = max(phase)
    if distribution == "ed":
        return [lax / count] * count
    if phase_length == "span":
        ends = [start] * (count + 1)
        for p, f in zip(phase, finish, strict=True):
            ends[p] = max(ends[p], f)
        weights = [ends[p] - ends[p - 1] for p in range(1, count + 1)]
    else:
        weights = [0.0] * count
        for p, e in zip(phase, runtimes, strict=True):
            weights[p - 1] = max(weights[p - 1], e)
    total = sum(weights)
    if total == 0:
        return [lax / count] * count
    return [lax * w / total for w in weights]


def sub_deadlines(deadline: float, phase: Sequence[int], runtimes: Sequence[float],
                  parents: Sequence[Sequence[int]], finish: Sequence[float], shares: Sequence[float],
                  order: Sequence[int], multi_parent: MultiParent = "align") -> list[float]:
    """Eq. 2 and setParentTasksSubDeadlines (RMDCWF.md, "Multi-parent tasks").

    ``sd⁰_t = ĉ_t + CL_phase(t)`` (ĉ = ``finish``, CL = cumulative share up to t's phase); last-phase
    tasks get ``deadline``. Then a parent p of a task with several parents (a *join*) is lifted by
    ``multi_parent``:

    * ``align`` — toward its co-parents: ``sd_p = max(sd⁰_p, min(target_p, cap_p))`` with ``target_p``
      the largest sd⁰ among the parents of p's joins (p included) and ``cap_p`` the smallest
      ``sd⁰_c − e_c`` over *all* children c of p, so no child loses its own sub-deadline; from sd⁰
      only, so the task order does not matter;
    * ``latest_start`` — the earlier reading: children before parents (reverse of the topological
      ``order``), ``sd_p = max(sd_p, min over p's joins c of sd_c − e_c)`` with the joins' values as
      already lifted (a single-parent child of p may be left an impossible sub-deadline);
    * ``none`` — Eq. 2 as is.

    >>> sub_deadlines(20.0, [1, 1, 2], [2.0, 4.0, 3.0], [[], [], [0, 1]], [2.0, 4.0, 7.0], [6.0, 7.0], [0, 1, 2])
    [10.0, 10.0, 20.0]
    >>> sub_deadlines(20.0, [1, 1, 2], [2.0, 4.0, 3.0], [[], [], [0, 1]], [2.0, 4.0, 7.0], [6.0, 7.0], [0, 1, 2],
    ...               "latest_start")
    [17.0, 17.0, 20.0]
    """
    if multi_parent not in get_args(MultiParent):
        raise ValueError(f"multi_parent must be one of {get_args(MultiParent)}, got {multi_parent!r}")
    cumulative = [0.0]
    for share in shares:
        cumulative.append(cumulative[-1] + share)
    last = len(shares)
    sd = [deadline if phase[t] == last else finish[t] + cumulative[phase[t]] for t in range(len(phase))]
    if multi_parent == "none":
        return sd
    joins: list[list[int]] = [[] for _ in phase]  # each task's children that have several parents
    for c, ps in enumerate(parents):
        if len(ps) > 1:
            for p in ps:
                joins[p].append(c)
    if multi_parent == "latest_start":
        for p in reversed(order):
            if joins[p]:
                sd[p] = max(sd[p], min(sd[c] - runtimes[c] for c in joins[p]))
        return sd
    children: list[list[int]] = [[] for _ in phase]
    for c, ps in enumerate(parents):
        for p in ps:
            children[p].append(c)
    sd0 = sd
    sd = list(sd0)
    for p, js in enumerate(joins):
        if js:
            target = max(sd0[q] for c in js for q in parents[c])
            cap = min(sd0[c] - runtimes[c] for c in children[p])
            sd[p] = max(sd0[p], min(target, cap))
    return sd
