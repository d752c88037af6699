"""The one run function: a workload, a cluster and a policy in; the schedule, its metrics and tables out.

``python -m sim`` and the sweep workers (``sweeps/task.py``) both call :func:`run`, so a trace
replayed from the command line and the same trace in a sweep give the same numbers. The workload's
``kind`` picks the metric set (:data:`METRIC_SETS`); the policy's own statistics
(:class:`~sim.core.PolicyStats`) are merged in, so no caller needs a branch per workload.

A job workload (``hpc``, ``multires``) is simulated whole and measured from its schedule. A
``workflow`` workload streams: its workflows are taken as the run reaches them and folded into the
metrics as they finish (:class:`~sim.workflows.metrics.WorkflowMetrics`), so memory follows the
unfinished workflows; the per-task table goes to a ``tasks`` sink only when one is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sim.core import Cluster, InputError, SimulationResult, Workload
from sim.engine import simulate, simulate_stream, validate_jobs
from sim.metrics import job_table, summarize
from sim.policies.base import Policy

if TYPE_CHECKING:
    from sim.workflows.metrics import TaskSink

Tables = dict[str, dict[str, list[Any]]]
MetricSet = Callable[[SimulationResult, Workload], tuple[dict[str, float], Tables]]


def _hpc(result: SimulationResult, workload: Workload) -> tuple[dict[str, float], Tables]:
    return summarize(result), {"jobs": job_table(result)}


def _multires(result: SimulationResult, workload: Workload) -> tuple[dict[str, float], Tables]:
    from sim.fairness import dominant_share_timeline, fairness_summary  # only multi-resource runs need them

    weights = getattr(workload, "weights", {})  # same yardstick for every policy
    summary = summarize(result) | fairness_summary(result, weights)
    return summary, {"jobs": job_table(result), "dominant_shares": dominant_share_timeline(result)}


#: job-workload kind → (summary metrics, tables saved with the run), from the whole schedule
METRIC_SETS: dict[str, MetricSet] = {"hpc": _hpc, "multires": _multires}
#: every workload kind: the job kinds and ``workflow`` (its metrics folded during the run)
KINDS = (*METRIC_SETS, "workflow")


def check_kind(policy: Policy, kind: str) -> None:
    """Refuse a policy that cannot schedule this kind of workload (EASY on workflows, RM-DCWF on a trace)."""
    if kind not in policy.workload_kinds:
        raise InputError(f"policy {policy.name!r} schedules {' or '.join(sorted(policy.workload_kinds))} workloads, "
                         f"not {kind} workloads: pick a policy for this workload (or a workload for this policy)")


@dataclass
class RunResult:
    """One simulated run: the schedule, its summary metrics, its tables and what reading taught us.

    For a workflow run ``result`` holds no records and no workflows (they were folded as they
    happened; the per-task rows went to the ``tasks`` sink, if any) and ``tables`` only ``workflows``."""

    result: SimulationResult
    summary: dict[str, float]
    tables: Tables
    notes: dict[str, int] = field(default_factory=dict)


def run(workload: Workload, cluster: Cluster, policy: Policy, *, kill_at_limit: bool = False,
        drop_oversized: bool = False, tasks: TaskSink | None = None) -> RunResult:
    """Validate the workload against the cluster, simulate it and compute the workload kind's metrics.

    ``drop_oversized`` applies to job workloads, ``tasks`` (where each task's row goes) to workflow runs."""
    if workload.kind not in KINDS:
        raise InputError(f"unknown workload kind {workload.kind!r}; expected one of {', '.join(KINDS)}")
    check_kind(policy, workload.kind)
    if workload.kind == "workflow":
        return _run_workflows(workload, cluster, policy, kill_at_limit, tasks)
    if tasks is not None:
        raise InputError(f"a {workload.kind} workload has no per-task table: tasks= is for workflow runs")
    jobs, dropped = validate_jobs(workload.jobs, cluster, drop_oversized=drop_oversized)
    if not jobs:  # every metric would be over an empty set
        why = (f"all {dropped} jobs are wider than the machine and were dropped (drop_oversized)" if dropped
               else "the workload has no jobs")
        raise InputError(f"{workload.source or 'workload'}: {why}: nothing to simulate")
    result = simulate(jobs, cluster, policy, kill_at_limit=kill_at_limit)
    summary, tables = METRIC_SETS[workload.kind](result, workload)
    summary.update(result.stats.counters)
    notes = dict(workload.notes, **({"dropped_oversized": dropped} if dropped else {}))
    return RunResult(result, summary, tables, notes)


def _run_workflows(workload: Workload, cluster: Cluster, policy: Policy, kill_at_limit: bool,
                   tasks: TaskSink | None) -> RunResult:
    from sim.workflows.metrics import WorkflowMetrics  # only workflow runs need it

    if workload.jobs:
        raise InputError(f"{workload.source or 'workload'}: a workflow workload's tasks are its workflows' "
                         f"(Workload.workflows); its jobs must be empty")
    metrics = WorkflowMetrics(cluster, workload.warmup, tasks)
    passes, stats = simulate_stream(workload.workflows, cluster, policy, metrics, kill_at_limit=kill_at_limit)
    if not metrics.arrived_count:
        raise InputError(f"{workload.source or 'workload'}: the workload has no workflows: nothing to simulate")
    summary = metrics.summary() | stats.counters
    return RunResult(SimulationResult([], cluster, policy.name, passes, stats), summary,
                     {"workflows": metrics.table}, dict(workload.notes))
