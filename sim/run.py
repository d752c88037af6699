"""The one run function: a workload, a cluster and a policy in; the schedule, its metrics and tables out.

``python -m sim`` and the sweep workers (``sweeps/task.py``) both call :func:`run`, so a trace
replayed from the command line and the same trace in a sweep give the same numbers. The workload's
``kind`` picks the metric set (:data:`METRIC_SETS`); the policy's own statistics
(:class:`~sim.core.PolicyStats`) are merged in, so no caller needs a branch per workload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sim.core import Cluster, InputError, SimulationResult, Workload
from sim.engine import simulate, validate_jobs
from sim.metrics import job_table, summarize
from sim.policies.base import Policy

Tables = dict[str, dict[str, list[Any]]]
MetricSet = Callable[[SimulationResult, Workload], tuple[dict[str, float], Tables]]


def _hpc(result: SimulationResult, workload: Workload) -> tuple[dict[str, float], Tables]:
    return summarize(result), {"jobs": job_table(result)}


def _multires(result: SimulationResult, workload: Workload) -> tuple[dict[str, float], Tables]:
    from sim.fairness import dominant_share_timeline, fairness_summary  # only multi-resource runs need them

    weights = getattr(workload, "weights", {})  # same yardstick for every policy
    summary = summarize(result) | fairness_summary(result, weights)
    return summary, {"jobs": job_table(result), "dominant_shares": dominant_share_timeline(result)}


def _workflow(result: SimulationResult, workload: Workload) -> tuple[dict[str, float], Tables]:
    from sim.workflows.metrics import task_table, workflow_summary, workflow_table  # only workflow runs need them

    return (workflow_summary(result, workload.warmup),
            {"tasks": task_table(result), "workflows": workflow_table(result)})


#: workload kind → (summary metrics, tables saved with the run)
METRIC_SETS: dict[str, MetricSet] = {"hpc": _hpc, "multires": _multires, "workflow": _workflow}


def check_kind(policy: Policy, kind: str) -> None:
    """Refuse a policy that cannot schedule this kind of workload (EASY on workflows, RM-DCWF on a trace)."""
    if kind not in policy.workload_kinds:
        raise InputError(f"policy {policy.name!r} schedules {' or '.join(sorted(policy.workload_kinds))} workloads, "
                         f"not {kind} workloads: pick a policy for this workload (or a workload for this policy)")


@dataclass
class RunResult:
    """One simulated run: the schedule, its summary metrics, its tables and what reading taught us."""

    result: SimulationResult
    summary: dict[str, float]
    tables: Tables
    notes: dict[str, int] = field(default_factory=dict)


def run(workload: Workload, cluster: Cluster, policy: Policy, *, kill_at_limit: bool = False,
        drop_oversized: bool = False) -> RunResult:
    """Validate the workload against the cluster, simulate it and compute the workload kind's metrics."""
    if workload.kind not in METRIC_SETS:
        raise InputError(f"unknown workload kind {workload.kind!r}; expected one of {', '.join(METRIC_SETS)}")
    check_kind(policy, workload.kind)
    jobs, dropped = validate_jobs(workload.jobs, cluster, drop_oversized=drop_oversized)
    if not jobs:  # every metric would be over an empty set
        why = (f"all {dropped} jobs are wider than the machine and were dropped (drop_oversized)" if dropped
               else "the workload has no jobs")
        raise InputError(f"{workload.source or 'workload'}: {why}: nothing to simulate")
    result = simulate(jobs, cluster, policy, kill_at_limit=kill_at_limit, workflows=workload.workflows)
    summary, tables = METRIC_SETS[workload.kind](result, workload)
    summary.update(result.stats.counters)
    notes = dict(workload.notes, **({"dropped_oversized": dropped} if dropped else {}))
    return RunResult(result, summary, tables, notes)
