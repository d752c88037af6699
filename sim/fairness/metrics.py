"""Fairness metrics of a multi-resource schedule (pure functions of a :class:`SimulationResult`).

A user's *dominant share* at time t is ``max_r x_r(t) / C_r`` where ``x(t)`` sums the demands of
its tasks running at t and ``C`` is the cluster's total capacity; ``w_u`` is the user's weight
(default 1). Definitions (span = last end − first submit, as in :func:`sim.metrics.summarize`):

* ``share/<user>/mean`` — the time-weighted mean of the user's dominant share over the span;
* ``fairness/jain`` — the time-weighted mean of Jain's index ``(Σ y)² / (n Σ y²)`` of the
  weighted dominant shares ``y_u = share_u(t) / w_u`` of the users *backlogged* at t (a task
  submitted and not yet started), over the instants with at least two such users (1.0 if there
  are none). 1 = every user who wants more holds the same weighted share, 1/n = one holds it all.
  Only users who want more count, as in max-min fairness: a user whose queue is empty is not
  wronged by a small share;
* ``fairness/jain_mean`` — Jain's index of the users' ``share/<user>/mean / w_u``; it mostly
  reflects how much work each user brought, since every task runs eventually;
* ``wait/<user>/mean`` — the user's mean of start − submit.

Over a span of 0 (every task took no time) the shares and ``fairness/jain_mean`` are NaN, not 0.

Utilisation per resource and the overall waits are :func:`sim.metrics.summarize`'s (one definition).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import groupby
from typing import Any

import numpy as np

from sim.core import SimulationResult

_SUBMIT, _END, _START = 0, 1, 2


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index of non-negative values (1.0 when all are equal or all zero).

    >>> jain_index([0.5, 0.5]), jain_index([1.0, 0.0]), jain_index([])
    (1.0, 0.5, 1.0)
    """
    total = float(sum(values))
    squares = float(sum(v * v for v in values))
    return 1.0 if squares == 0.0 else total * total / (len(values) * squares)


def _sweep(result: SimulationResult) -> Iterator[tuple[float, list[str], list[float], set[int], set[int]]]:
    """Yield ``(time, users, shares, backlogged, changed)`` after all events at each event instant.

    ``users`` is sorted; ``shares`` (dominant, by user index) and ``backlogged`` (indices of users
    with a task submitted and not started) are live state; ``changed`` holds the users whose
    allocation changed at this instant.
    """
    records = result.records
    users = sorted({r.job.user for r in records})
    uid = {u: i for i, u in enumerate(users)}
    totals = result.cluster.total
    events: list[tuple[float, int, int]] = []
    for k, rec in enumerate(records):
        events += [(rec.job.submit, _SUBMIT, k), (rec.start, _START, k), (rec.end, _END, k)]
    events.sort(key=lambda e: e[0])
    alloc = [[0.0] * len(totals) for _ in users]
    running = [0] * len(users)
    waiting = [0] * len(users)
    shares = [0.0] * len(users)
    backlogged: set[int] = set()
    for time, group in groupby(events, key=lambda e: e[0]):
        changed: set[int] = set()
        queued: set[int] = set()
        for _, kind, k in group:
            job = records[k].job
            u = uid[job.user]
            queued.add(u)
            if kind == _SUBMIT:
                waiting[u] += 1
                continue
            sign = 1.0 if kind == _START else -1.0
            running[u] += 1 if kind == _START else -1
            waiting[u] -= kind == _START
            vec = alloc[u]
            for r, d in enumerate(job.demand):
                vec[r] += sign * d
            changed.add(u)
        for u in queued:
            if waiting[u]:
                backlogged.add(u)
            else:
                backlogged.discard(u)
        for u in changed:
            if running[u] == 0:
                alloc[u] = [0.0] * len(totals)  # no float residue once a user holds nothing
            shares[u] = max(x / c for x, c in zip(alloc[u], totals, strict=True))
        yield time, users, shares, backlogged, changed


def dominant_share_timeline(result: SimulationResult) -> dict[str, list[Any]]:
    """Each user's dominant share as a step function: columns ``time``, ``user``, ``dominant_share``.

    Every user has a row at the first event instant (the first submission) and one at every
    instant its share changes; a row holds until the user's next row. Rows are sorted by
    (time, user).
    """
    out: dict[str, list[Any]] = {"time": [], "user": [], "dominant_share": []}
    last: list[float | None] = []
    for time, users, shares, _, changed in _sweep(result):
        if not last:
            last = [None] * len(users)
            changed = set(range(len(users)))
        for i in sorted(changed):
            if shares[i] != last[i]:
                last[i] = shares[i]
                out["time"].append(time)
                out["user"].append(users[i])
                out["dominant_share"].append(shares[i])
    return out


def fairness_summary(result: SimulationResult, weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """Fairness metrics and per-user waits (see the module docstring); users absent from ``weights``
    weigh 1."""
    records = result.records
    if not records:
        return {}
    weights = weights or {}
    first = min(r.job.submit for r in records)
    span = max(r.end for r in records) - first
    users = sorted({r.job.user for r in records})
    w = [float(weights.get(u, 1.0)) for u in users]
    area = [0.0] * len(users)  # ∫ share dt, accumulated whenever a user's share changes
    since, held = [first] * len(users), [0.0] * len(users)
    jain_time = jain_area = 0.0
    previous, segment_jain = first, None  # Jain's index of the segment starting at `previous`
    for time, _, shares, backlogged, changed in _sweep(result):
        if segment_jain is not None:
            jain_area += segment_jain * (time - previous)
            jain_time += time - previous
        for u in changed:
            area[u] += held[u] * (time - since[u])
            since[u], held[u] = time, shares[u]
        segment_jain = jain_index([shares[u] / w[u] for u in backlogged]) if len(backlogged) >= 2 else None
        previous = time
    mean_share = np.array(area) / span if span > 0 else np.full(len(users), np.nan)
    summary: dict[str, float] = {f"share/{u}/mean": float(s) for u, s in zip(users, mean_share, strict=True)}
    summary["fairness/jain"] = jain_area / jain_time if jain_time > 0 else 1.0
    summary["fairness/jain_mean"] = jain_index((mean_share / np.array(w)).tolist())
    wait = np.array([r.start - r.job.submit for r in records])
    user_of = np.array([r.job.user for r in records])
    for u in users:
        summary[f"wait/{u}/mean"] = float(wait[user_of == u].mean())
    return summary
