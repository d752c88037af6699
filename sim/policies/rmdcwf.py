"""RM-DCWF (Lim et al. 2017) and its FIFO baseline as engine policies.

Both drive one :class:`~sim.workflows.planner.Planner`: each scheduling pass first plans the
workflows that arrived (in (arrival, id) order), then starts the tasks whose planned start is now;
a wake-up is asked for the next planned start. ``fifo_workflow`` is the planner without budgeting:
every task at its earliest feasible time, no sub-deadlines, no deadline check, no remapping.

Statistics: ``remap/attempts``, ``remap/successes``, ``remap/repeats_refused`` (identical attempts
not retried), ``remap/restores``; the planning seconds of each workflow (budgeting + mapping +
remapping, RM-DCWF's overhead O) and each task's ``sub_deadline``, kept until the workflow
finishes (handed over by ``workflow_done``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import get_args

from sim.core import InputError, Job, PolicyStats, Start
from sim.policies.base import BasePolicy, EngineView, WorkflowArrivals
from sim.workflows.budget import MultiParent
from sim.workflows.planner import (
    LateRule,
    LaxityDistribution,
    LaxityKind,
    NegativeLaxity,
    PhaseLength,
    Planner,
    PlannerConfig,
    RemapTrigger,
    Tsp,
)

WORKFLOW_KINDS = frozenset({"workflow"})


class WorkflowPlanner(BasePolicy):
    """Engine adapter of the RM-DCWF planner (see the module docstring); named ``rmdcwf``, or
    ``fifo_workflow`` for a planner without budgeting."""

    workload_kinds = WORKFLOW_KINDS

    def __init__(self, config: PlannerConfig, name: str | None = None) -> None:
        self.name = name or ("rmdcwf" if config.budget else "fifo_workflow")
        self.config = config
        self._planner: Planner | None = None
        self._book = WorkflowArrivals(self.name)
        self._seconds: dict[int, float] = {}  # unfinished workflow → planning seconds
        self._sub_deadline: dict[int, dict[int, float]] = {}  # unfinished workflow → task id → sub-deadline

    def attach(self, view: EngineView) -> None:
        super().attach(view)
        self._planner = Planner(*view.cluster.slotted_shape(self.name), self.config)

    def submit(self, job: Job, now: float) -> None:
        self._book.submit(self.view, job)

    def complete(self, job: Job, now: float) -> None:
        assert self._planner is not None
        if self._book.complete(job):
            self._planner.finished(job.workflow)

    def schedule(self, now: float) -> Sequence[Start]:
        planner = self._planner
        assert planner is not None, "attach() first"
        for wf in self._book.take():
            began = time.perf_counter()
            plan = planner.map_job(wf, now)
            self._seconds[wf.id] = time.perf_counter() - began
            if plan.sub_deadline is not None:
                self._sub_deadline[wf.id] = dict(zip(plan.keys, plan.sub_deadline, strict=True))
        return [Start(task, max(resource, 0)) for task, resource in planner.take_due(now)]

    def next_wakeup(self, now: float) -> float | None:
        assert self._planner is not None
        return self._planner.next_due()

    def workflow_done(self, workflow: int) -> PolicyStats:
        sub = self._sub_deadline.pop(workflow, None)
        return PolicyStats(seconds_by_job={workflow: self._seconds.pop(workflow)},
                           task_values={} if sub is None else {"sub_deadline": sub})

    def stats(self) -> PolicyStats:
        return PolicyStats(dict(self._planner.counters) if self._planner is not None and self.config.budget else {})


def _choice(option: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InputError(f"rmdcwf: unknown {option} {value!r}; expected one of {', '.join(allowed)}")


def rmdcwf(laxity_distribution: LaxityDistribution = "pd", laxity: LaxityKind = "sl", tsp: Tsp = "tsp1",
           phase_length: PhaseLength = "span", remap_trigger: RemapTrigger = "subdeadline",
           remap_cap: int | None = None, multi_parent: MultiParent = "align",
           negative_laxity: NegativeLaxity = "zero", late_rule: LateRule = "forced") -> WorkflowPlanner:
    """RM-DCWF; options as in RMDCWF.md (defaults first): ``laxity_distribution`` pd|ed, ``laxity``
    sl|tl, ``tsp`` tsp1|tsp2, ``phase_length`` span|max_task (PD's ET_p), ``remap_trigger``
    subdeadline|deadline, ``remap_cap`` None or the most already-mapped jobs one attempt may move,
    ``multi_parent`` align|latest_start|none (parents of multi-parent tasks), ``negative_laxity``
    zero|signed (how a negative L_j is distributed), ``late_rule`` forced|planned (when a job is
    late in later remaps)."""
    _choice("laxity_distribution", laxity_distribution, get_args(LaxityDistribution))
    _choice("laxity", laxity, get_args(LaxityKind))
    _choice("tsp", tsp, get_args(Tsp))
    _choice("phase_length", phase_length, get_args(PhaseLength))
    _choice("remap_trigger", remap_trigger, get_args(RemapTrigger))
    _choice("multi_parent", multi_parent, get_args(MultiParent))
    _choice("negative_laxity", negative_laxity, get_args(NegativeLaxity))
    _choice("late_rule", late_rule, get_args(LateRule))
    if remap_cap is not None and (isinstance(remap_cap, bool) or not isinstance(remap_cap, int) or remap_cap < 0):
        raise InputError(f"rmdcwf: remap_cap must be null or a non-negative integer, got {remap_cap!r}")
    return WorkflowPlanner(PlannerConfig(laxity_distribution, laxity, tsp, phase_length, remap_trigger, remap_cap,
                                         multi_parent, negative_laxity, late_rule))


def fifo_workflow() -> WorkflowPlanner:
    """The FIFO baseline: arrival order, earliest feasible times, no budgeting, no remapping."""
    return WorkflowPlanner(PlannerConfig(budget=False))
