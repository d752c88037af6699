"""The RM-DCWF planner (Alg. 4–7): budget a workflow at its arrival, map it onto the slot calendar,
check its deadline and remap the jobs in its way; no engine in sight (see
:mod:`sim.policies.rmdcwf` for the policy that drives it).

The plan is exact — execution times are known — so a task starts at its planned time and the
planned completion of a workflow *is* its completion. Only tasks not yet started ever move.

Remapping follows the paper: the job that failed its check is removed; the jobs whose planned
tasks overlap ``[s_j, d_j]`` plus the job itself are remapped by TSP1 in deadline order (ties:
smaller laxity), each with the deadline check (a nested failure starts a nested attempt); jobs
already late go last without a check; an attempt whose ordered job list was tried before (during
this arrival) is refused; on failure the root attempt restores the saved plan exactly and a second
try orders by laxity; if that fails too, the job is mapped anyway and is late from then on
(``late_rule: forced``; ``planned``: late only while planned past d_j, the earlier reading).

The deadline check (Alg. 5, line 15) has two readings, both kept (``remap_trigger``); the line
itself is lost in the seed's extraction, only "checkDeadline is set to true (line 15), mapJobHelper()
attempts to remap job j and a set of jobs that may have caused j to miss its deadline" survives.

* ``subdeadline`` (default): a task whose planned completion passes its own sub-deadline triggers
  the remap. For it: DBW exists to give "each of job j's tasks a sub-deadline", and TSP2 places a
  task "while ensuring the task's sub-deadline is satisfied" — the sub-deadline is the per-task bound
  the mapping works against.
* ``deadline``: only a task completing after the job's deadline d_j triggers it. For it: every
  sentence about the check's outcome speaks of the job's deadline — mapJob "returns true if the job j
  is scheduled to meet its deadline", checkDeadline "is set to true if the method should try to map
  job j to meet its deadline", the remap takes "the jobs that may have caused j to miss its deadline"
  and "the jobs that have already missed their deadlines" go last. Under TSP1 the sub-deadlines then
  act only as a tie-break of the task order, which is the paper's own explanation of PD ≈ ED for
  LIGO and Genome ("TSP1 scheduling tasks to execute at their earliest possible times, regardless of
  their sub-deadlines").
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from sim.core import Job, Workflow
from sim.workflows.budget import (
    MultiParent,
    alone_schedule,
    laxity,
    mapping_order,
    phase_laxities,
    sub_deadlines,
)
from sim.workflows.calendar import Calendar, CalendarState
from sim.workflows.dag import levels, topological_order
from sim.workflows.mapping import Placement, map_tasks

LaxityDistribution = Literal["pd", "ed"]
LaxityKind = Literal["sl", "tl"]
Tsp = Literal["tsp1", "tsp2"]
PhaseLength = Literal["span", "max_task"]
RemapTrigger = Literal["subdeadline", "deadline"]
NegativeLaxity = Literal["zero", "signed"]
LateRule = Literal["forced", "planned"]


@dataclass(frozen=True, slots=True)
class PlannerConfig:
    """One RM-DCWF configuration; ``budget=False`` is the FIFO baseline (earliest feasible times,
    no sub-deadlines, no deadline check, no remapping)."""

    laxity_distribution: LaxityDistribution = "pd"
    laxity: LaxityKind = "sl"
    tsp: Tsp = "tsp1"
    phase_length: PhaseLength = "span"
    remap_trigger: RemapTrigger = "subdeadline"
    remap_cap: int | None = None
    multi_parent: MultiParent = "align"
    negative_laxity: NegativeLaxity = "zero"
    late_rule: LateRule = "forced"
    budget: bool = True


@dataclass(slots=True)
class JobPlan:
    """One workflow's static data (local task indices) and its current plan."""

    wf: Workflow
    keys: list[int]
    runtimes: list[float]
    parents: list[list[int]]
    topo: list[int]
    rank: list[int]
    laxity: float = 0.0
    sub_deadline: list[float] | None = None
    placed: dict[int, Placement] = field(default_factory=dict)
    started: set[int] = field(default_factory=set)
    #: mapped last, unchecked, in a remap: planned past its deadline, or (``late_rule: forced``) ``forced``
    late: bool = False
    #: force-mapped after its own remap failed (then late for good under ``late_rule: forced``)
    forced: bool = False

    @classmethod
    def of(cls, wf: Workflow) -> JobPlan:
        local = {task.id: i for i, task in enumerate(wf.tasks)}
        parents = [[local[p] for p in task.parents] for task in wf.tasks]
        topo = topological_order(parents, f"workflow {wf.id}")
        rank = [0] * len(topo)
        for r, t in enumerate(topo):
            rank[t] = r
        return cls(wf, [task.id for task in wf.tasks], [task.runtime for task in wf.tasks], parents, topo, rank)

    @property
    def completion(self) -> float:
        return max(p.end for p in self.placed.values())


@dataclass(slots=True)
class _Saved:
    calendar: CalendarState
    plans: dict[int, tuple[dict[int, Placement], bool]]
    mapped: list[int]


class Planner:
    """RM-DCWF's state: the calendar, the plan of every workflow not yet finished and the
    ``mappedJobs`` list (mapped workflows with tasks still to start, in mapping order)."""

    def __init__(self, resources: int, slots: int, config: PlannerConfig) -> None:
        self.config = config
        self.resources, self.slots = resources, slots
        self.calendar = Calendar(resources, slots)
        self.plans: dict[int, JobPlan] = {}
        self.mapped: dict[int, None] = {}
        self.owner: dict[int, tuple[int, int]] = {}  # task id → (workflow id, local index)
        self.counters = {"remap/attempts": 0.0, "remap/successes": 0.0, "remap/repeats_refused": 0.0,
                         "remap/restores": 0.0}
        self._now = 0.0
        self._tsp: Tsp = config.tsp
        self._by_laxity = False
        self._tried: set[tuple[int, ...]] = set()
        #: (planned start, workflow, topological rank, task id); stale entries are skipped when popped
        self._due: list[tuple[float, int, int, int]] = []

    # -- Alg. 4: mapJob ------------------------------------------------------------------------
    def map_job(self, wf: Workflow, now: float) -> JobPlan:
        """Budget and map an arriving workflow (pruning the calendar up to ``now`` first)."""
        self._now = now
        self.calendar.prune(now)
        plan = JobPlan.of(wf)
        self.plans[wf.id] = plan
        self.owner.update((k, (wf.id, t)) for t, k in enumerate(plan.keys))
        if self.config.budget:
            self._budget(plan)
        self._tried.clear()
        self._by_laxity = False
        self._tsp = self.config.tsp
        self._map_helper(plan, root=True, check=self.config.budget)
        return plan

    def _budget(self, plan: JobPlan) -> None:
        """DBW (Alg. 1): SET schedule, laxity (Eq. 1), phase shares, sub-deadlines (Eq. 2)."""
        cfg, wf = self.config, plan.wf
        s = wf.earliest_start
        if cfg.laxity == "sl":  # SET^R: the generator's schedule when it was made on this system's shape
            finish = (list(wf.alone_finish) if wf.alone_shape == (self.resources, self.slots) and wf.alone_finish
                      else alone_schedule(plan.runtimes, plan.parents, self.resources, self.slots, s))
        else:  # SET^{R_PL}: on the live plan, then removed
            placed = map_tasks(self.calendar, plan.keys, plan.runtimes, plan.parents,
                               mapping_order(plan.runtimes), s)
            assert placed is not None
            finish = [placed[t].end for t in range(len(plan.keys))]
            for t, p in placed.items():
                if p.resource >= 0:
                    self.calendar.remove(plan.keys[t])
        plan.laxity = laxity(wf.deadline, s, max(finish) - s)  # signed: the job order compares it
        spread = max(plan.laxity, 0.0) if cfg.negative_laxity == "zero" else plan.laxity
        phase = levels(plan.parents)
        shares = phase_laxities(spread, phase, plan.runtimes, finish, s, cfg.laxity_distribution, cfg.phase_length)
        plan.sub_deadline = sub_deadlines(wf.deadline, phase, plan.runtimes, plan.parents, finish, shares, plan.topo,
                                          cfg.multi_parent)

    # -- Alg. 5: mapJobHelper --------------------------------------------------------------------
    def _map_helper(self, plan: JobPlan, root: bool, check: bool) -> bool:
        """Map the unstarted tasks of ``plan``; with ``check``, a missed bound triggers remapping."""
        todo = [t for t in mapping_order(plan.runtimes, plan.sub_deadline) if t not in plan.started]
        finished = {t: plan.placed[t].end for t in plan.started}
        bound: Sequence[float] | None = None
        if check:
            bound = (plan.sub_deadline if self.config.remap_trigger == "subdeadline"
                     else [plan.wf.deadline] * len(plan.keys))
        end_by = plan.sub_deadline if self._tsp == "tsp2" else None
        floor = max(plan.wf.earliest_start, self._now)
        placed = map_tasks(self.calendar, plan.keys, plan.runtimes, plan.parents, todo, floor, finished, end_by, bound)
        if placed is None:
            if self._remap(plan, root):
                return True
            if root:  # a nested failure fails its root attempt, which restores the saved plan anyway
                plan.forced = True  # mapJobHelper returns false "to indicate job j will not meet its deadline"
                self._map_helper(plan, root, check=False)
            return False
        plan.placed = {t: plan.placed[t] for t in plan.started} | placed
        for t, p in placed.items():
            heapq.heappush(self._due, (p.start, plan.wf.id, plan.rank[t], plan.keys[t]))
        plan.late = plan.completion > plan.wf.deadline or (plan.forced and self.config.late_rule == "forced")
        if len(plan.started) < len(plan.keys):
            self.mapped[plan.wf.id] = None
        return True

    # -- Alg. 6–7: remapJob / remapJobHelper -----------------------------------------------------
    def _remap(self, plan: JobPlan, root: bool) -> bool:
        self._tsp = "tsp1"
        if self._remap_helper(plan, root):
            return True
        if not root:
            return False
        self._by_laxity = True
        return self._remap_helper(plan, root)

    def _order_key(self, plan: JobPlan) -> tuple[float, float, int]:
        d, lax = plan.wf.deadline, plan.laxity
        return (lax, d, plan.wf.id) if self._by_laxity else (d, lax, plan.wf.id)

    def _remap_helper(self, plan: JobPlan, root: bool) -> bool:
        wf = plan.wf
        ids = {self.owner[key][0] for key in self.calendar.overlapping(wf.earliest_start, wf.deadline)}
        others = [self.plans[i] for i in ids if i in self.mapped and i != wf.id]
        others.sort(key=self._order_key)
        if self.config.remap_cap is not None:
            others = others[:self.config.remap_cap]
        jobs = sorted([*others, plan], key=self._order_key)
        attempt = tuple(p.wf.id for p in jobs)
        if attempt in self._tried:
            self.counters["remap/repeats_refused"] += 1
            return False
        self._tried.add(attempt)
        self.counters["remap/attempts"] += 1
        saved = self._save(plan) if root else None
        for p in others:
            self._unmap(p)
        late = [p for p in jobs if p.late and p is not plan]
        for p in jobs:
            if p not in late and not self._map_helper(p, root=False, check=True):
                if saved is not None:
                    self._restore(saved)
                    self.counters["remap/restores"] += 1
                return False
        for p in late:
            self._map_helper(p, root=False, check=False)
        self.counters["remap/successes"] += 1
        return True

    def _unmap(self, plan: JobPlan) -> None:
        """Take the unstarted tasks of a mapped job off the calendar."""
        for t, p in plan.placed.items():
            if t not in plan.started and p.resource >= 0:
                self.calendar.remove(plan.keys[t])
        plan.placed = {t: plan.placed[t] for t in plan.started}
        self.mapped.pop(plan.wf.id, None)

    def _save(self, plan: JobPlan) -> _Saved:
        ids = [*self.mapped, plan.wf.id]
        return _Saved(self.calendar.snapshot(), {i: (dict(self.plans[i].placed), self.plans[i].late) for i in ids},
                      list(self.mapped))

    def _restore(self, saved: _Saved) -> None:
        self.calendar.restore(saved.calendar)
        for i, (placed, late) in saved.plans.items():
            self.plans[i].placed, self.plans[i].late = placed, late
        self.mapped = dict.fromkeys(saved.mapped)

    # -- execution bookkeeping -------------------------------------------------------------------
    def _valid(self, entry: tuple[float, int, int, int]) -> JobPlan | None:
        start, wf_id, _, task_id = entry
        plan = self.plans.get(wf_id)
        if plan is None:
            return None
        t = self.owner[task_id][1]
        p = plan.placed.get(t)
        return plan if p is not None and t not in plan.started and p.start == start else None

    def take_due(self, now: float) -> list[tuple[Job, int]]:
        """The tasks planned to start at ``now`` (parents first) with their resource, marked started."""
        due: list[tuple[Job, int]] = []
        while self._due and self._due[0][0] <= now:
            entry = heapq.heappop(self._due)
            plan = self._valid(entry)
            if plan is None:
                continue
            if entry[0] < now:
                raise RuntimeError(f"rmdcwf: task {entry[3]} was planned to start at {entry[0]}, missed (now {now})")
            t = self.owner[entry[3]][1]
            due.append((plan.wf.tasks[t], plan.placed[t].resource))
            plan.started.add(t)
            if len(plan.started) == len(plan.keys):
                self.mapped.pop(plan.wf.id, None)
        return due

    def next_due(self) -> float | None:
        """The next planned start, if any."""
        while self._due and self._valid(self._due[0]) is None:
            heapq.heappop(self._due)
        return self._due[0][0] if self._due else None

    def finished(self, wf_id: int) -> None:
        """Forget a workflow whose tasks have all completed (memory follows the active plan)."""
        plan = self.plans.pop(wf_id)
        for key in plan.keys:
            del self.owner[key]
