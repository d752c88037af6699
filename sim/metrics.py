"""Per-job records and summary metrics (pure functions of a :class:`SimulationResult`).

Metric names are ``group/name``. Definitions:

* ``wait`` = start − submit; ``turnaround`` = end − submit;
* ``bsld`` (bounded slowdown) = max(1, (wait + run) / max(run, τ)) with τ = 10 s;
* ``util`` = busy capacity-seconds / (capacity × span), span = last end − first submit
  (one ``util/<resource>`` per resource on a multi-resource cluster);
* ``makespan`` = last end − first submit.

A schedule without jobs has no metrics (an :class:`~sim.core.InputError`: every mean would be over
an empty set); ``util`` over a span of 0 (every job took no time) is NaN, not 0.
"""

from __future__ import annotations

import math
from typing import Any

from sim.core import InputError, JobRecord, SimulationResult

BSLD_TAU = 10.0


def job_table(result: SimulationResult) -> dict[str, list[Any]]:
    """Column-oriented per-job table, in input order (ready for ``pandas.DataFrame``)."""
    records = result.records
    columns: dict[str, list[Any]] = {
        "job_id": [r.job.id for r in records],
        "submit_time": [r.job.submit for r in records],
        "start_time": [r.start for r in records],
        "end_time": [r.end for r in records],
    }
    for k, resource in enumerate(result.cluster.resources):
        columns[resource] = [r.job.demand[k] for r in records]
    columns["time_limit"] = [r.job.time_limit for r in records]
    columns["wait"] = [r.start - r.job.submit for r in records]
    columns["bsld"] = _bounded_slowdown(records)
    columns["machine"] = [r.machine for r in records]
    if any(r.job.user for r in records):
        columns["user"] = [r.job.user for r in records]
    if any(r.job.workflow >= 0 for r in records):
        columns["workflow"] = [r.job.workflow for r in records]
    return columns


def bounded_slowdown(r: JobRecord) -> float:
    """One job's bounded slowdown (the module docstring's ``bsld``).

    >>> from sim.core import rigid_job
    >>> bounded_slowdown(JobRecord(rigid_job(0, 0.0, 1, 60.0), 120.0, 180.0))
    3.0
    """
    return max(1.0, ((r.start - r.job.submit) + (r.end - r.start)) / max(r.end - r.start, BSLD_TAU))


def _bounded_slowdown(records: list[JobRecord]) -> list[float]:
    return [bounded_slowdown(r) for r in records]


def percentile(ordered: list[float], q: float) -> float:
    """The ``q``-th percentile of sorted values, linearly interpolated exactly as ``numpy.percentile``
    does by default (plain Python, so replaying a trace does not import numpy).

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([0.0, 10.0, 20.0], 75)
    (2.5, 15.0)
    """
    index = q / 100 * (len(ordered) - 1)
    below = math.floor(index)
    a, b = ordered[below], ordered[min(below + 1, len(ordered) - 1)]
    t = index - below
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def summarize(result: SimulationResult) -> dict[str, float]:
    """Summary metrics of a schedule (see module docstring for definitions)."""
    records = result.records
    if not records:
        raise InputError(f"{result.policy}: the schedule has no jobs, so no metric can be computed")
    n = len(records)
    wait = sorted(r.start - r.job.submit for r in records)
    bsld = sorted(_bounded_slowdown(records))
    span = float(max(r.end for r in records) - min(r.job.submit for r in records))
    summary: dict[str, float] = {
        "jobs": float(n),
        "wait/mean": math.fsum(wait) / n,
        "wait/p50": percentile(wait, 50),
        "wait/p95": percentile(wait, 95),
        "wait/max": float(wait[-1]),
        "bsld/mean": math.fsum(bsld) / n,
        "bsld/p95": percentile(bsld, 95),
        "bsld/max": bsld[-1],
        "turnaround/mean": math.fsum(r.end - r.job.submit for r in records) / n,
        "makespan": span,
    }
    totals = result.cluster.total
    for k, resource in enumerate(result.cluster.resources):
        busy = math.fsum(r.job.demand[k] * (r.end - r.start) for r in records)
        util = float(busy / (totals[k] * span)) if span > 0 else math.nan
        key = "util" if len(totals) == 1 else f"util/{resource}"
        summary[key] = util
    return summary
