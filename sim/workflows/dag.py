"""Task graphs of one workflow: validation, DAG levels (RM-DCWF's phases) and critical path.

A workflow's tasks are numbered 0..n−1 (their index, which is also their ``task_id`` in every
output); ``parents[t]`` lists the indices of the tasks t waits for.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from sim.core import InputError


def topological_order(parents: Sequence[Sequence[int]], where: str = "workflow") -> list[int]:
    """Task indices with every parent before its children (ties: smaller index first).

    Raises :class:`InputError` naming ``where`` and the task for an unknown parent, a task that is
    its own parent, or a cycle.

    >>> topological_order([[], [2], [0]])
    [0, 2, 1]
    """
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    waiting = [0] * n
    for t, ps in enumerate(parents):
        for p in ps:
            if not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < n:
                raise InputError(f"{where}: task {t}: unknown parent {p!r} (tasks are 0..{n - 1})")
            if p == t:
                raise InputError(f"{where}: task {t} is its own parent")
        for p in set(ps):
            children[p].append(t)
            waiting[t] += 1
    ready = [t for t in range(n) if waiting[t] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        t = heapq.heappop(ready)
        order.append(t)
        for c in children[t]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, c)
    if len(order) < n:
        stuck = min(t for t in range(n) if waiting[t] > 0)
        raise InputError(f"{where}: the task graph has a cycle (through task {stuck})")
    return order


def levels(parents: Sequence[Sequence[int]]) -> list[int]:
    """Each task's DAG level: 1 without parents, else 1 + its deepest parent's level.

    >>> levels([[], [0], [0], [1, 2], []])
    [1, 2, 2, 3, 1]
    """
    out = [0] * len(parents)
    for t in topological_order(parents):
        out[t] = 1 + max((out[p] for p in parents[t]), default=0)
    return out


def critical_path(runtimes: Sequence[float], parents: Sequence[Sequence[int]]) -> float:
    """Length of the longest runtime-weighted path (the workflow's length on unlimited resources).

    >>> critical_path([2.0, 3.0, 1.0, 4.0], [[], [0], [0], [1, 2]])
    9.0
    """
    finish = [0.0] * len(parents)
    for t in topological_order(parents):
        finish[t] = max((finish[p] for p in parents[t]), default=0.0) + runtimes[t]
    return max(finish, default=0.0)
