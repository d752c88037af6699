"""Per-job records and summary metrics (pure functions of a :class:`SimulationResult`).

Metric names are ``group/name``. Definitions:

* ``wait`` = start − submit; ``turnaround`` = end − submit;
* ``bsld`` (bounded slowdown) = max(1, (wait + run) / max(run, τ)) with τ = 10 s;
* ``util`` = busy capacity-seconds / (capacity × span), span = last end − first submit
  (one ``util/<resource>`` per resource on a multi-resource cluster);
* ``makespan`` = last end − first submit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.core import SimulationResult

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
    columns["bsld"] = _bounded_slowdown(records).tolist()
    columns["machine"] = [r.machine for r in records]
    if any(r.job.user for r in records):
        columns["user"] = [r.job.user for r in records]
    if any(r.job.workflow >= 0 for r in records):
        columns["workflow"] = [r.job.workflow for r in records]
    return columns


def _bounded_slowdown(records: list) -> np.ndarray:
    wait = np.array([r.start - r.job.submit for r in records], dtype=float)
    run = np.array([r.end - r.start for r in records], dtype=float)
    return np.maximum(1.0, (wait + run) / np.maximum(run, BSLD_TAU))


def summarize(result: SimulationResult) -> dict[str, float]:
    """Summary metrics of a schedule (see module docstring for definitions)."""
    records = result.records
    if not records:
        return {"jobs": 0.0}
    submit = np.array([r.job.submit for r in records], dtype=float)
    start = np.array([r.start for r in records], dtype=float)
    end = np.array([r.end for r in records], dtype=float)
    wait = start - submit
    turnaround = end - submit
    bsld = _bounded_slowdown(records)
    span = float(end.max() - submit.min())
    summary: dict[str, float] = {
        "jobs": float(len(records)),
        "wait/mean": float(wait.mean()),
        "wait/p50": float(np.percentile(wait, 50)),
        "wait/p95": float(np.percentile(wait, 95)),
        "wait/max": float(wait.max()),
        "bsld/mean": float(bsld.mean()),
        "bsld/p95": float(np.percentile(bsld, 95)),
        "bsld/max": float(bsld.max()),
        "turnaround/mean": float(turnaround.mean()),
        "makespan": span,
    }
    totals = result.cluster.total
    demand = np.array([r.job.demand for r in records], dtype=float)
    busy = (demand * (end - start)[:, None]).sum(axis=0)
    for k, resource in enumerate(result.cluster.resources):
        util = float(busy[k] / (totals[k] * span)) if span > 0 else 0.0
        key = "util" if len(totals) == 1 else f"util/{resource}"
        summary[key] = util
    return summary
