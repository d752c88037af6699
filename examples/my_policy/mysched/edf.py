"""Earliest deadline first for deadline-constrained workflows, built from RM-DCWF's pieces.

A task becomes *ready* when its parents have finished and its workflow's earliest start has come;
every scheduling pass starts ready tasks, most urgent first, on the resource with the most free
slots, until no slot is free. Urgency is the task's sub-deadline from RM-DCWF's deadline budgeting
(``key: subdeadline``: SET^R alone on the empty system, laxity shared by phase length, Eq. 2 —
``sim.workflows.budget``) or simply its workflow's deadline (``key: deadline``). Unlike RM-DCWF it
plans nothing ahead: a list scheduler that never reserves, never remaps.

The engine validates every start (capacity, parents finished, earliest start, no task twice).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from sim.core import InputError, Job, Start, Workflow
from sim.policies.base import BasePolicy, EngineView
from sim.workflows.budget import alone_schedule, laxity, phase_laxities, sub_deadlines
from sim.workflows.dag import levels, topological_order

KEYS = ("subdeadline", "deadline")


class EdfWorkflow(BasePolicy):
    """EDF list scheduling of ready workflow tasks (see the module docstring)."""

    name = "edf_workflow"
    workload_kinds = frozenset({"workflow"})

    def __init__(self, key: str = "subdeadline") -> None:
        if key not in KEYS:
            raise InputError(f"edf_workflow: unknown key {key!r}; expected one of {', '.join(KEYS)}")
        self.key = key
        self._urgency: dict[int, float] = {}  # task id → its sort key
        self._waiting: dict[int, int] = {}  # task id → parents not finished yet
        self._children: dict[int, list[Job]] = {}
        self._ready: list[tuple[float, int, Job]] = []  # heap of released ready tasks by urgency
        self._held: list[tuple[float, int, Job]] = []  # heap of ready tasks by their workflow's earliest start
        self._release: dict[int, float] = {}
        self._budgeted: set[int] = set()  # workflows whose urgencies are known

    def attach(self, view: EngineView) -> None:
        super().attach(view)
        self._resources, self._slots = view.cluster.slotted_shape(self.name)

    def submit(self, job: Job, now: float) -> None:
        wf = self.view.workflows[job.workflow]
        if wf.id not in self._budgeted:
            self._budgeted.add(wf.id)
            self._urgency.update(self._budget(wf))
        self._release[job.id] = wf.earliest_start
        self._waiting[job.id] = len(job.parents)
        for parent in job.parents:
            self._children.setdefault(parent, []).append(job)
        if not job.parents:
            self._make_ready(job)

    def complete(self, job: Job, now: float) -> None:
        for child in self._children.pop(job.id, []):
            self._waiting[child.id] -= 1
            if not self._waiting[child.id]:
                self._make_ready(child)

    def schedule(self, now: float) -> Sequence[Start]:
        while self._held and self._held[0][0] <= now:
            _, _, task = heapq.heappop(self._held)
            heapq.heappush(self._ready, (self._urgency[task.id], task.id, task))
        free = [int(slots[0]) for slots in self.view.free]
        starts = []
        while self._ready and max(free) > 0:
            _, _, task = heapq.heappop(self._ready)
            resource = max(range(len(free)), key=lambda r: (free[r], -r))
            free[resource] -= 1
            del self._waiting[task.id], self._urgency[task.id], self._release[task.id]
            starts.append(Start(task, resource))
        return starts

    def next_wakeup(self, now: float) -> float | None:
        return self._held[0][0] if self._held else None

    def _make_ready(self, task: Job) -> None:
        heapq.heappush(self._held, (self._release[task.id], task.id, task))

    def _budget(self, wf: Workflow) -> dict[int, float]:
        """Each task's urgency: its RM-DCWF sub-deadline (PD, SL), or the workflow's deadline."""
        if self.key == "deadline":
            return {task.id: wf.deadline for task in wf.tasks}
        local = {task.id: i for i, task in enumerate(wf.tasks)}
        parents = [[local[p] for p in task.parents] for task in wf.tasks]
        runtimes = [task.runtime for task in wf.tasks]
        s = wf.earliest_start
        finish = alone_schedule(runtimes, parents, self._resources, self._slots, s)
        phase = levels(parents)
        shares = phase_laxities(laxity(wf.deadline, s, max(finish) - s), phase, runtimes, finish, s)
        sd = sub_deadlines(wf.deadline, phase, runtimes, parents, finish, shares, topological_order(parents))
        return {task.id: sd[local[task.id]] for task in wf.tasks}
