"""Metrics of a workflow schedule (RM-DCWF's P, T and utilisation), pure functions of a result.

Per workflow j: completion ``CT_j`` = the latest end of its tasks; late ⇔ ``CT_j > d_j``.
Over the workflows after the warm-up prefix (the first ``warmup`` by (arrival, id)):

* ``late/proportion`` (P) — late workflows / workflows;
* ``turnaround/mean`` (T) — mean of ``CT_j − s_j``;
* ``overhead/mean_s`` (O) — mean wall-clock seconds the policy spent planning a workflow
  (budgeting + mapping + remapping), from :class:`~sim.core.PolicyStats`; the only metric that
  differs between identical runs;
* ``jobs`` — workflows measured.

Over the whole run (span = last task end − first arrival): ``util`` = busy slot-seconds /
(slots × span), and ``load/offered`` = total work / (slots × (last arrival − first arrival)), the
load the stream offers (λ · mean work / slots for a Poisson stream). A result without workflows, or
a warm-up that leaves none to measure, is an :class:`~sim.core.InputError`; ``util`` over a span of
0 and ``load/offered`` over a window of 0 (a single arrival instant) are NaN.
"""

from __future__ import annotations

import math
from typing import Any

from sim.core import InputError, SimulationResult, Workflow


def _measured(workflows: tuple[Workflow, ...], warmup: int) -> list[Workflow]:
    ordered = sorted(workflows, key=lambda wf: (wf.arrival, wf.id))
    if warmup >= len(ordered):
        raise InputError(f"warm-up of {warmup} workflows leaves none of the {len(ordered)} to measure")
    return ordered[warmup:]


def completions(result: SimulationResult) -> dict[int, float]:
    """Workflow id → completion time (latest end of its tasks)."""
    out: dict[int, float] = {}
    for r in result.records:
        wf = r.job.workflow
        if r.end > out.get(wf, -math.inf):
            out[wf] = r.end
    return out


def workflow_summary(result: SimulationResult, warmup: int = 0) -> dict[str, float]:
    """P, T, O, util and offered load (see the module docstring)."""
    if not result.workflows:
        raise InputError(f"{result.policy}: the result has no workflows, so no metric can be computed")
    done = completions(result)
    measured = _measured(result.workflows, warmup)
    late = sum(done[wf.id] > wf.deadline for wf in measured)
    summary = {
        "jobs": float(len(measured)),
        "late/proportion": late / len(measured),
        "turnaround/mean": sum(done[wf.id] - wf.earliest_start for wf in measured) / len(measured),
    }
    seconds = result.stats.seconds_by_job
    if seconds:
        summary["overhead/mean_s"] = sum(seconds.get(wf.id, 0.0) for wf in measured) / len(measured)
    slots = sum(result.cluster.total)
    first = min(wf.arrival for wf in result.workflows)
    last_arrival = max(wf.arrival for wf in result.workflows)
    span = max(r.end for r in result.records) - first if result.records else 0.0
    busy = sum(r.end - r.start for r in result.records)
    summary["util"] = busy / (slots * span) if span > 0 else math.nan
    work = sum(wf.work for wf in result.workflows)
    window = last_arrival - first
    summary["load/offered"] = work / (slots * window) if window > 0 else math.nan
    return summary


def task_table(result: SimulationResult) -> dict[str, list[Any]]:
    """One row per task: ``job_id, task_id`` (its index in the workflow), ``resource, start, end,
    sub_deadline`` (NaN when the policy sets none), in (workflow, task) order."""
    record = {r.job.id: r for r in result.records}
    sub = result.stats.task_values.get("sub_deadline", {})
    columns: dict[str, list[Any]] = {k: [] for k in ("job_id", "task_id", "resource", "start", "end", "sub_deadline")}
    for wf in result.workflows:
        for index, task in enumerate(wf.tasks):
            r = record[task.id]
            columns["job_id"].append(wf.id)
            columns["task_id"].append(index)
            columns["resource"].append(r.machine)
            columns["start"].append(r.start)
            columns["end"].append(r.end)
            columns["sub_deadline"].append(sub.get(task.id, math.nan))
    return columns


def workflow_table(result: SimulationResult) -> dict[str, list[Any]]:
    """One row per workflow: ``job_id, arrival, earliest_start, deadline, completion, late``."""
    done = completions(result)
    rows = [(wf.id, wf.arrival, wf.earliest_start, wf.deadline, done[wf.id], done[wf.id] > wf.deadline)
            for wf in result.workflows]
    names = ("job_id", "arrival", "earliest_start", "deadline", "completion", "late")
    return {name: [row[k] for row in rows] for k, name in enumerate(names)}
