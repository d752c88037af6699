"""MRCP-RM (Lim, Majumdar, Ashwood-Smith, ICPP 2014 / IEEE TPDS 2017) as an engine policy: on every
job arrival, one constraint program (OR-Tools CP-SAT) re-plans every task not yet started.

The model, on a one-second grid relative to ``origin = ceil(now)`` (times are rounded outwards: a
running task's end and a duration up, a deadline down, so every plan is feasible in real time):

* per unstarted task, a start variable and one *optional* fixed-size interval per resource with
  exactly one present (the resource alternatives);
* per resource, a cumulative of capacity c_r over those intervals and the running tasks (fixed);
* precedence (a child starts after its parents end), start ≥ s_j and ≥ now;
* per job, a completion C_j ≥ every task end and a lateness literal: ``not late_j ⇒ C_j ≤ d_j``;
* objective: ``(Σ C_j + 1)`` · Σ late_j + Σ C_j, so fewer late jobs first, then total completion.

Bounded: started tasks enter only as fixed capacity (or as a parent's end) and finished jobs never
do. Deterministic: one worker, a fixed ``random_seed`` and a limit in CP-SAT's *deterministic* time
(``max_deterministic_time``), so a rerun gives the same plan on any machine; the wall-clock
``max_time_in_seconds`` is a safety net whose hits are counted (a hit makes the run machine
dependent). The previous plan plus the arriving job placed greedily (earliest feasible start,
RM-DCWF's calendar) is the solver's hint and, when the solver returns no solution, the plan
(counted as ``mrcp/fallbacks``). OR-Tools is imported only here, on first use.

Statistics: ``mrcp/solves``, ``mrcp/optimal``, ``mrcp/fallbacks``, ``mrcp/wall_limit_hits``, model
size per solve (``mrcp/{tasks,intervals,constraints}_{mean,max}``), ``mrcp/deterministic_time_mean``;
the seconds of each arrival's model build + solve (the overhead O, as rmdcwf reports it).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from sim.core import InputError, Job, PolicyStats, Start, Workflow
from sim.policies.base import BasePolicy, EngineView, WorkflowArrivals
from sim.workflows.budget import mapping_order
from sim.workflows.calendar import Calendar
from sim.workflows.dag import topological_order
from sim.workflows.mapping import map_tasks

ResourceModel = Literal["pooled", "alternatives"]

INSTALL_HINT = "policy mrcp needs OR-Tools (CP-SAT): pip install 'schedlab[mrcp]'"


def cp_model() -> Any:
    """``ortools.sat.python.cp_model``, or an :class:`InputError` saying how to install it."""
    try:
        from ortools.sat.python import cp_model as module
    except ImportError:
        raise InputError(INSTALL_HINT) from None
    return module


@dataclass(frozen=True, slots=True)
class MrcpConfig:
    """Solver limits (see the module docstring)."""

    max_deterministic_time: float = 0.05
    max_time_in_seconds: float = 60.0
    random_seed: int = 0
    resources: ResourceModel = "pooled"


@dataclass(frozen=True, slots=True)
class Solve:
    """One solve: model size, CP-SAT status name, deterministic and wall seconds."""

    tasks: int
    intervals: int
    constraints: int
    status: str
    deterministic_time: float
    wall_time: float


#: a plan: unstarted task id → (start tick, resource)
Plan = dict[int, tuple[int, int]]


@dataclass(slots=True)
class _Model:
    """What :meth:`MrcpPolicy._build` hands to the solver and back."""

    model: Any
    origin: int
    starts: dict[int, Any] = field(default_factory=dict)
    present: dict[int, list[Any]] = field(default_factory=dict)
    intervals: int = 0


class MrcpPolicy(BasePolicy):
    """Engine adapter of MRCP-RM (see the module docstring)."""

    name = "mrcp"
    workload_kinds = frozenset({"workflow"})

    def __init__(self, config: MrcpConfig) -> None:
        self.config = config
        self.solves: list[Solve] = []
        self._m = self._c = 0
        self._book = WorkflowArrivals(self.name)
        self._jobs: dict[int, Workflow] = {}  # arrived, not finished
        self._plan: Plan = {}
        self._running: dict[int, tuple[int, float]] = {}  # task id → (resource, end)
        self._done_by: dict[int, float] = {}  # workflow id → latest end of its started tasks
        self._rank: dict[int, int] = {}  # task id → topological rank in its workflow
        self._tasks: dict[int, Job] = {}  # task id → task, for the unfinished jobs
        self._due: list[tuple[int, int, int, int]] = []  # (tick, workflow, rank, task id)
        self._seconds: dict[int, float] = {}  # unfinished workflow → planning seconds
        self._fallbacks = 0
        self._wall_hits = 0

    def attach(self, view: EngineView) -> None:
        super().attach(view)
        self._m, self._c = view.cluster.slotted_shape(self.name)

    def submit(self, job: Job, now: float) -> None:
        self._book.submit(self.view, job)

    def complete(self, job: Job, now: float) -> None:
        self._running.pop(job.id, None)
        if self._book.complete(job):
            wf = self._jobs.pop(job.workflow)
            self._done_by.pop(wf.id, None)
            for task in wf.tasks:
                del self._rank[task.id], self._tasks[task.id]

    def schedule(self, now: float) -> Sequence[Start]:
        for wf in self._book.take():
            began = time.perf_counter()
            self._jobs[wf.id] = wf
            local = {task.id: i for i, task in enumerate(wf.tasks)}
            topo = topological_order([[local[p] for p in task.parents] for task in wf.tasks], f"workflow {wf.id}")
            self._rank.update((wf.tasks[t].id, r) for r, t in enumerate(topo))
            self._tasks.update((task.id, task) for task in wf.tasks)
            self._replan(wf, now)
            self._seconds[wf.id] = time.perf_counter() - began
        return self._take_due(now)

    def next_wakeup(self, now: float) -> float | None:
        while self._due and self._plan.get(self._due[0][3], (None,))[0] != self._due[0][0]:
            heapq.heappop(self._due)
        return float(self._due[0][0]) if self._due else None

    def stats(self) -> PolicyStats:
        n = len(self.solves)
        counters = {"mrcp/solves": float(n), "mrcp/fallbacks": float(self._fallbacks),
                    "mrcp/wall_limit_hits": float(self._wall_hits),
                    "mrcp/optimal": float(sum(s.status == "OPTIMAL" for s in self.solves))}
        if n:
            for key in ("tasks", "intervals", "constraints"):
                values = [getattr(s, key) for s in self.solves]
                counters[f"mrcp/{key}_mean"] = sum(values) / n
                counters[f"mrcp/{key}_max"] = float(max(values))
            counters["mrcp/deterministic_time_mean"] = sum(s.deterministic_time for s in self.solves) / n
        return PolicyStats(counters)

    def workflow_done(self, workflow: int) -> PolicyStats:
        return PolicyStats(seconds_by_job={workflow: self._seconds.pop(workflow)})

    # -- planning --------------------------------------------------------------------------------
    def _replan(self, wf: Workflow, now: float) -> None:
        origin = math.ceil(now)
        hint = self._greedy(wf, origin)
        built = self._build(origin, hint)
        solution = self._solve(built)
        if solution is None:
            self._fallbacks += 1
            solution = hint
        self._plan = solution
        self._due = [(tick, self._tasks[task].workflow, self._rank[task], task) for task, (tick, _) in solution.items()]
        heapq.heapify(self._due)

    def _greedy(self, wf: Workflow, origin: int) -> Plan:
        """The previous plan plus ``wf`` at its earliest feasible starts (RM-DCWF's TSP1 placement)."""
        cal = Calendar(self._m, self._c)
        booked: list[tuple[int, int, int, int]] = []  # (start, end, resource, task) in grid ticks from origin
        for task, (r, end) in self._running.items():
            if math.ceil(end) > origin:
                booked.append((0, math.ceil(end) - origin, r, task))
        for task, (tick, r) in self._plan.items():
            booked.append((tick - origin, tick - origin + _ticks(self._tasks[task].runtime), r, task))
        for start, end, r, task in sorted(booked):
            if end > start:
                slot = next(k for k in range(self._c) if _fits(cal, task, r, k, start, end))
                cal.insert(task, r, slot, start, end - start)
        keys = [task.id for task in wf.tasks]
        durations = [float(_ticks(task.runtime)) for task in wf.tasks]
        local = {task.id: i for i, task in enumerate(wf.tasks)}
        parents = [[local[p] for p in task.parents] for task in wf.tasks]
        floor = max(math.ceil(wf.earliest_start) - origin, 0)
        placed = map_tasks(cal, keys, durations, parents, mapping_order(durations), floor)
        assert placed is not None
        plan = dict(self._plan)
        plan.update((keys[t], (origin + int(p.start), max(p.resource, 0))) for t, p in placed.items())
        return plan

    def _build(self, origin: int, hint: Plan) -> _Model:
        """The CP model of every unstarted task (see the module docstring), hinted with ``hint``."""
        cp = cp_model()
        model = cp.CpModel()
        built = _Model(model, origin)
        jobs = [wf for wf in self._jobs.values() if any(t.id in hint for t in wf.tasks)]
        dur = {t.id: _ticks(t.runtime) for wf in jobs for t in wf.tasks if t.id in hint}
        fixed_end = {task: math.ceil(end) - origin for task, (_, end) in self._running.items()}
        lower = {wf.id: max(math.ceil(wf.earliest_start) - origin, 0) for wf in jobs}
        horizon = max([0, *lower.values(), *fixed_end.values(),
                       *(tick - origin + dur[t] for t, (tick, _) in hint.items())]) + sum(dur.values()) + 1
        pooled = self.config.resources == "pooled"
        per_resource: list[list[Any]] = [[] for _ in range(1 if pooled else self._m)]
        for task, (r, _) in self._running.items():
            if fixed_end[task] > 0:
                interval = model.new_fixed_size_interval_var(0, fixed_end[task], f"run{task}")
                per_resource[0 if pooled else r].append(interval)
                built.intervals += 1
        for wf in jobs:
            for t in wf.tasks:
                if t.id not in hint:
                    continue
                floor = max([lower[wf.id], *(max(fixed_end.get(p, 0), 0) for p in t.parents if p not in hint)])
                start = model.new_int_var(floor, horizon, f"s{t.id}")
                built.starts[t.id] = start
                model.add_hint(start, hint[t.id][0] - origin)
                if pooled:
                    per_resource[0].append(model.new_fixed_size_interval_var(start, dur[t.id], ""))
                    built.intervals += 1
                    continue
                present = []
                for r in range(self._m):
                    x = model.new_bool_var(f"x{t.id}_{r}")
                    per_resource[r].append(model.new_optional_fixed_size_interval_var(start, dur[t.id], x, ""))
                    present.append(x)
                built.intervals += self._m
                built.present[t.id] = present
                model.add_exactly_one(present)
                for r, x in enumerate(present):
                    model.add_hint(x, r == hint[t.id][1])
        for wf in jobs:
            self._precedence(model, built.starts, dur, [t for t in wf.tasks if t.id in hint], horizon,
                             {t: tick - origin + dur[t] for t, (tick, _) in hint.items()})
        for intervals in per_resource:
            if intervals:
                model.add_cumulative(intervals, [1] * len(intervals), self._c * (self._m if pooled else 1))
        late_terms, completions = [], []
        for wf in jobs:
            done_by = self._done_by.get(wf.id)
            floor = max(math.ceil(done_by) - origin, 0) if done_by is not None else 0
            c_j = model.new_int_var(floor, horizon, f"C{wf.id}")
            ends = [hint[t.id][0] - origin + dur[t.id] for t in wf.tasks if t.id in hint]
            for t in wf.tasks:
                if t.id in hint:
                    model.add(c_j >= built.starts[t.id] + dur[t.id])
            late = model.new_bool_var(f"late{wf.id}")
            deadline = math.floor(wf.deadline) - origin
            model.add(c_j <= deadline).only_enforce_if(~late)
            model.add_hint(c_j, max([floor, *ends]))
            model.add_hint(late, max([floor, *ends]) > deadline)
            late_terms.append(late)
            completions.append(c_j)
        model.minimize((len(jobs) * horizon + 1) * sum(late_terms) + sum(completions))
        return built

    @staticmethod
    def _precedence(model: Any, starts: dict[int, Any], dur: dict[int, int], tasks: list[Job], horizon: int,
                    hinted_end: dict[int, int]) -> None:
        """Children start after their unstarted parents end. Children sharing a parent set (every
        reduce of a MapReduce job waits for every map) share one "parents done" variable, so k
        parents × n children cost k + n constraints instead of k · n."""
        groups: dict[tuple[int, ...], list[int]] = {}
        for t in tasks:
            parents = tuple(sorted(p for p in t.parents if p in starts))
            if parents:
                groups.setdefault(parents, []).append(t.id)
        for parents, children in groups.items():
            if len(children) == 1 or len(parents) == 1:
                for child in children:
                    for p in parents:
                        model.add(starts[child] >= starts[p] + dur[p])
                continue
            ready = model.new_int_var(0, horizon, "")
            model.add_hint(ready, max(hinted_end[p] for p in parents))
            for p in parents:
                model.add(ready >= starts[p] + dur[p])
            for child in children:
                model.add(starts[child] >= ready)

    def _solve(self, built: _Model) -> Plan | None:
        """Run CP-SAT with the configured limits; the plan, or ``None`` without a solution."""
        cp = cp_model()
        solver = cp.CpSolver()
        params = solver.parameters
        params.num_workers = 1
        params.random_seed = self.config.random_seed
        params.max_deterministic_time = self.config.max_deterministic_time
        params.max_time_in_seconds = self.config.max_time_in_seconds
        status = self._run_solver(solver, built.model)
        if solver.wall_time >= self.config.max_time_in_seconds and status != cp.OPTIMAL:
            self._wall_hits += 1
        self.solves.append(Solve(len(built.starts), built.intervals, len(built.model.proto.constraints),
                                 solver.status_name(status), solver.deterministic_time, solver.wall_time))
        if status not in (cp.OPTIMAL, cp.FEASIBLE):
            return None
        ticks = {task: built.origin + int(solver.value(start)) for task, start in built.starts.items()}
        if built.present:
            return {task: (tick, next(r for r, x in enumerate(built.present[task]) if solver.boolean_value(x)))
                    for task, tick in ticks.items()}
        return self._assign(ticks)

    def _assign(self, ticks: dict[int, int]) -> Plan:
        """Resources for a pooled solution: tasks in start order each take the lowest free slot.

        Exact, not a heuristic: every running task holds its slot from before ``now`` and every
        planned task starts at or after ``now``, so when a task starts fewer than m · c_r intervals
        overlap its start (the cumulative) and some slot's last booking has ended."""
        free_at = [-math.inf] * (self._m * self._c)  # slot → end of its last booking (ticks)
        used = [0] * self._m
        for r, end in sorted(self._running.values()):
            free_at[r * self._c + used[r]] = math.ceil(end)
            used[r] += 1
        plan: Plan = {}
        for task, tick in sorted(ticks.items(), key=lambda item: (item[1], item[0])):
            duration = _ticks(self._tasks[task].runtime)
            if duration == 0:
                plan[task] = (tick, 0)
                continue
            slot = next(k for k, end in enumerate(free_at) if end <= tick)
            free_at[slot] = tick + duration
            plan[task] = (tick, slot // self._c)
        return plan

    def _run_solver(self, solver: Any, model: Any) -> Any:
        """One CP-SAT call (a seam for tests that need a solver returning no solution)."""
        return solver.solve(model)

    # -- execution -------------------------------------------------------------------------------
    def _take_due(self, now: float) -> list[Start]:
        starts: list[Start] = []
        while self._due and self._due[0][0] <= now:
            tick, wf_id, _, task = heapq.heappop(self._due)
            if self._plan.get(task, (None,))[0] != tick:
                continue
            if tick < now:
                raise RuntimeError(f"mrcp: task {task} was planned to start at {tick}, missed (now {now})")
            _, r = self._plan.pop(task)
            job = self._tasks[task]
            end = now + job.runtime
            self._running[task] = (r, end)
            self._done_by[wf_id] = max(self._done_by.get(wf_id, -math.inf), end)
            starts.append(Start(job, r))
        return starts


def _ticks(runtime: float) -> int:
    """A duration on the one-second grid, rounded up."""
    return math.ceil(runtime)


def _fits(cal: Calendar, key: int, r: int, slot: int, start: int, end: int) -> bool:
    try:
        cal.insert(("probe", key), r, slot, start, end - start)
    except ValueError:
        return False
    cal.remove(("probe", key))
    return True


def mrcp(max_deterministic_time: float = 0.05, max_time_in_seconds: float = 60.0, random_seed: int = 0,
         resources: ResourceModel = "pooled") -> MrcpPolicy:
    """MRCP-RM; fails at once (on the driver) with how to install OR-Tools when it is missing."""
    if resources not in get_args(ResourceModel):
        raise InputError(f"mrcp: unknown resources {resources!r}; expected one of {', '.join(get_args(ResourceModel))}")
    for name, value in (("max_deterministic_time", max_deterministic_time),
                        ("max_time_in_seconds", max_time_in_seconds)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InputError(f"mrcp: {name} must be a positive number of seconds, got {value!r}")
    if isinstance(random_seed, bool) or not isinstance(random_seed, int) or random_seed < 0:
        raise InputError(f"mrcp: random_seed must be a non-negative integer, got {random_seed!r}")
    cp_model()
    return MrcpPolicy(MrcpConfig(float(max_deterministic_time), float(max_time_in_seconds), random_seed, resources))
