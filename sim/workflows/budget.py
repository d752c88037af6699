"""Deadline budgeting of RM-DCWF (DBW, Alg. 1–3): the SET schedules, laxity (Eq. 1), phase
laxities (PD / ED) and task sub-deadlines (Eq. 2 plus the multi-parent rule).

:func:`alone_schedule` is the one SET^R routine: the generators draw deadlines with it and the
policy budgets with it, so both agree on SET^R to the bit.

>>> alone_schedule([5.0, 3.0, 2.0], [[], [0], [0]], machines=1, slots=1, start=10.0)
[15.0, 18.0, 20.0]
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.workflows.calendar import Calendar
from sim.workflows.mapping import map_tasks

#: how a phase's share of the laxity is weighed (PD): its length in the SET schedule, or its longest task
PHASE_LENGTHS = ("span", "max_task")


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
    on an empty ``machines`` × ``slots`` system from ``start``; SET^R = max − start."""
    placed = map_tasks(Calendar(machines, slots), range(len(runtimes)), runtimes, parents,
                       mapping_order(runtimes), start)
    assert placed is not None
    return [placed[t].end for t in range(len(runtimes))]


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
                  order: Sequence[int]) -> list[float]:
    """Eq. 2 and setParentTasksSubDeadlines.

    ``sd_t = ĉ_t + CL_phase(t)`` (ĉ = ``finish``, CL = cumulative share up to t's phase); last-phase
    tasks get ``deadline``. Then, children before parents (reverse of the topological ``order``),
    a parent of tasks with several parents gets ``max(sd_p, min over those children of sd_c − e_c)``.

    >>> sub_deadlines(20.0, [1, 1, 2], [2.0, 4.0, 3.0], [[], [], [0, 1]], [2.0, 4.0, 7.0], [6.0, 7.0], [0, 1, 2])
    [17.0, 17.0, 20.0]
    """
    cumulative = [0.0]
    for share in shares:
        cumulative.append(cumulative[-1] + share)
    last = len(shares)
    sd = [deadline if phase[t] == last else finish[t] + cumulative[phase[t]] for t in range(len(phase))]
    joins: list[list[int]] = [[] for _ in phase]  # each task's children that have several parents
    for c, ps in enumerate(parents):
        if len(ps) > 1:
            for p in ps:
                joins[p].append(c)
    for p in reversed(order):
        if joins[p]:
            sd[p] = max(sd[p], min(sd[c] - runtimes[c] for c in joins[p]))
    return sd

