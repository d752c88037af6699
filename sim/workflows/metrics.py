"""Metrics of a workflow schedule (RM-DCWF's P, T and utilisation), folded as the run goes.

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
load the stream offers (λ · mean work / slots for a Poisson stream). A run without workflows, or
a warm-up that leaves none to measure, is an :class:`~sim.core.InputError`; ``util`` over a span of
0 and ``load/offered`` over a window of 0 (a single arrival instant) are NaN.

Memory: :class:`WorkflowMetrics` (an engine :class:`~sim.engine.Recorder`) keeps a workflow's task
records only until it and every workflow before it have finished, then folds it — in (arrival, id)
order, so every sum adds the same numbers in the same order as the built-in ``sum`` over the whole
schedule would — into running sums, one row of the per-workflow table, and (only when a sink is
given) one row per task, handed to the sink at once (:data:`TASK_COLUMNS`).
"""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sim.core import Cluster, InputError, JobRecord, PolicyStats, SimulationResult, Workflow

#: one row per task (a task sink's row), in (workflow, task) order; ``sub_deadline`` NaN when the policy sets none
TASK_COLUMNS = ("job_id", "task_id", "resource", "start", "end", "sub_deadline")
#: one row per workflow
WORKFLOW_COLUMNS = ("job_id", "arrival", "earliest_start", "deadline", "completion", "late")
#: where a run's task rows go as they are folded (a CSV or Parquet writer, a :class:`TaskTable`)
TaskSink = Callable[[tuple[int, int, int, float, float, float]], None]

_COMPENSATED = sys.version_info >= (3, 12)  # the built-in sum adds floats with Neumaier's compensation


@dataclass(slots=True)
class RunningSum:
    """Floats added one at a time; :attr:`value` equals the built-in ``sum`` of the same floats in the
    same order (plain addition before Python 3.12, Neumaier's compensated sum from 3.12, as CPython)."""

    hi: float = 0.0
    lo: float = 0.0
    compensated: bool = _COMPENSATED

    def add(self, x: float) -> None:
        if not self.compensated:
            self.hi += x
            return
        t = self.hi + x
        if abs(self.hi) >= abs(x):
            self.lo += (self.hi - t) + x
        else:
            self.lo += (x - t) + self.hi
        self.hi = t

    @property
    def value(self) -> float:
        return self.hi + self.lo if self.lo and math.isfinite(self.lo) else self.hi


@dataclass(slots=True)
class _Open:
    """A workflow not folded yet: its task records and, once it finished, the policy's values for it."""

    wf: Workflow
    records: dict[int, JobRecord] = field(default_factory=dict)
    stats: PolicyStats | None = None


class WorkflowMetrics:
    """The module's metrics, folded from what a run reports (see the module docstring); feed it
    workflows in (arrival, id) order."""

    def __init__(self, cluster: Cluster, warmup: int = 0, tasks: TaskSink | None = None) -> None:
        self.slots = sum(cluster.total)
        self.warmup = warmup
        self.tasks = tasks
        #: one row per folded workflow, in (arrival, id) order
        self.table: dict[str, list[Any]] = {name: [] for name in WORKFLOW_COLUMNS}
        self.arrived_count = 0
        self._open: dict[int, _Open] = {}
        self._order: deque[_Open] = deque()  # arrived, not folded, in arrival order
        self._late = 0
        self._turnaround, self._seconds, self._busy, self._work = RunningSum(), RunningSum(), RunningSum(), RunningSum()
        self._timed = False  # the policy reported planning seconds for some workflow
        self._first, self._last, self._end = math.inf, -math.inf, -math.inf

    def arrived(self, workflow: Workflow) -> None:
        entry = _Open(workflow)
        self._open[workflow.id] = entry
        self._order.append(entry)
        self._work.add(workflow.work)
        self._first, self._last = min(self._first, workflow.arrival), max(self._last, workflow.arrival)
        self.arrived_count += 1

    def started(self, record: JobRecord) -> None:
        self._open[record.job.workflow].records[record.job.id] = record
        if record.end > self._end:
            self._end = record.end

    def finished(self, workflow: Workflow, stats: PolicyStats) -> None:
        self._open.pop(workflow.id).stats = stats
        while self._order and self._order[0].stats is not None:
            self._fold(self._order.popleft())

    def _fold(self, entry: _Open) -> None:
        wf, stats = entry.wf, entry.stats
        assert stats is not None
        sub = stats.task_values.get("sub_deadline", {})
        completion = -math.inf
        for index, task in enumerate(wf.tasks):
            r = entry.records[task.id]
            self._busy.add(r.end - r.start)
            if r.end > completion:
                completion = r.end
            if self.tasks is not None:
                self.tasks((wf.id, index, r.machine, r.start, r.end, sub.get(task.id, math.nan)))
        late = completion > wf.deadline
        if len(self.table["job_id"]) >= self.warmup:
            self._late += late
            self._turnaround.add(completion - wf.earliest_start)
            self._seconds.add(stats.seconds_by_job.get(wf.id, 0.0))
        self._timed = self._timed or bool(stats.seconds_by_job)
        for name, value in zip(WORKFLOW_COLUMNS, (wf.id, wf.arrival, wf.earliest_start, wf.deadline, completion,
                                                  late), strict=True):
            self.table[name].append(value)

    def summary(self) -> dict[str, float]:
        """P, T, O, util and offered load of the workflows folded (every one that arrived)."""
        count = len(self.table["job_id"])
        assert count == self.arrived_count and not self._order, "summary() before every workflow finished"
        if not count:
            raise InputError("no workflow was run, so no metric can be computed")
        if self.warmup >= count:
            raise InputError(f"warm-up of {self.warmup} workflows leaves none of the {count} to measure")
        measured = count - self.warmup
        summary = {"jobs": float(measured), "late/proportion": self._late / measured,
                   "turnaround/mean": self._turnaround.value / measured}
        if self._timed:
            summary["overhead/mean_s"] = self._seconds.value / measured
        span = self._end - self._first
        summary["util"] = self._busy.value / (self.slots * span) if span > 0 else math.nan
        window = self._last - self._first
        summary["load/offered"] = self._work.value / (self.slots * window) if window > 0 else math.nan
        return summary


class TaskTable:
    """A task sink keeping the rows as a column table (:data:`TASK_COLUMNS`): for small runs."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name in TASK_COLUMNS}

    def __call__(self, row: tuple[int, int, int, float, float, float]) -> None:
        for column, value in zip(self.columns.values(), row, strict=True):
            column.append(value)


def folded(result: SimulationResult, warmup: int = 0, tasks: TaskSink | None = None) -> WorkflowMetrics:
    """A finished :func:`~sim.engine.simulate` result's metrics, folded as a run folds them."""
    if not result.workflows:
        raise InputError(f"{result.policy}: the result has no workflows, so no metric can be computed")
    metrics = WorkflowMetrics(result.cluster, warmup, tasks)
    ordered = sorted(result.workflows, key=lambda wf: (wf.arrival, wf.id))
    for wf in ordered:
        metrics.arrived(wf)
    for record in result.records:
        metrics.started(record)
    for wf in ordered:
        metrics.finished(wf, result.stats)
    return metrics


def workflow_summary(result: SimulationResult, warmup: int = 0) -> dict[str, float]:
    """P, T, O, util and offered load of a finished result (see the module docstring)."""
    return folded(result, warmup).summary()


def workflow_table(result: SimulationResult) -> dict[str, list[Any]]:
    """One row per workflow of a finished result (:data:`WORKFLOW_COLUMNS`), in (arrival, id) order."""
    return folded(result).table


def completions(result: SimulationResult) -> dict[int, float]:
    """Workflow id → completion time (latest end of its tasks)."""
    table = workflow_table(result)
    return dict(zip(table["job_id"], table["completion"], strict=True))
