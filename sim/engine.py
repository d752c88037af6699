"""Discrete-event engine.

Events are completions (a heap of ``(end_time, job_id)``), arrivals (in ``(submit, id)`` order) and
policy wake-ups. At one instant the engine applies **every completion first (in job-id order), then
every arrival in (submit time, job id) order, then one scheduling pass**; time then jumps to the
next event. There is no global state: the same jobs, cluster and policy give the same schedule in
any process.

**Zero-length workflow tasks** (RM-DCWF places them without a slot; also a task so short that adding
it to the clock changes nothing, e.g. 1e-7 s at t = 1e10, as its planned end says) hold no capacity and are
complete the instant they start: a decision later in the same pass may start their children at
that instant, and the policy hears of their completion right after the pass, before
``next_wakeup`` — so they never cause a second pass at the same instant. (A zero-runtime rigid job
of a trace keeps the older meaning: it holds its nodes for no time and its completion is an event
at the same instant, which gives the queue behind it a second pass there, as DR_EVT does.)

**Workflows**: a task of workflow j (``Job.workflow``) may not start before the workflow's
``earliest_start`` s_j, and its parents are tasks of the same workflow; the engine enforces both.
Once a workflow's last task has ended the policy hands over what it kept for it
(``Policy.workflow_done``).

**No progress**: a policy whose wake-ups start nothing while jobs wait on an idle machine with no
arrival or completion left would move the clock forever; the engine ends such a run with one line
(:class:`sim.stall.Stall` gives the rule).

**Memory**: the engine holds only what is live. Arrivals are taken one instant ahead, a job leaves
the engine when it starts (its :class:`~sim.core.JobRecord` goes to a :class:`Recorder`) and a
workflow when its last task ends. :func:`simulate` keeps every record (job traces, tests);
:func:`simulate_stream` keeps nothing, so a run's memory follows its unfinished workflows, however
long the stream (with the invariant checks on, as in the tests, it keeps the records to check them).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sim.core import Cluster, InputError, Job, JobRecord, PolicyStats, SimulationResult, Workflow
from sim.invariants import check_schedule, checks_enabled
from sim.policies.base import EngineView, Policy
from sim.stall import Stall

#: jobs arriving together: their time, their workflow (``None`` for jobs of no workflow) and the jobs
Arrival = tuple[float, Workflow | None, Sequence[Job]]


class Recorder(Protocol):
    """Where a run's results go as they happen."""

    def arrived(self, workflow: Workflow) -> None:
        """A workflow's tasks arrived (workflows in arrival order)."""

    def started(self, record: JobRecord) -> None:
        """A job started (its end is known then)."""

    def finished(self, workflow: Workflow, stats: PolicyStats) -> None:
        """A workflow's last task ended; ``stats``: what the policy kept for it (``Policy.workflow_done``)."""


class SchedulingError(RuntimeError):
    """A policy decided something impossible (a bug in the policy, not in the input)."""


class OversizedJobError(InputError):
    """A job wider than every machine. Each interface names its own way to skip such jobs (``fix``)
    and the file and line the job came from, via :meth:`describe`."""

    def __init__(self, job: Job, cluster: Cluster) -> None:
        self.job_id = job.id
        demand = ", ".join(f"{r}={d:g}" for r, d in zip(cluster.resources, job.demand, strict=True))
        most = [max(machine[k] for machine in cluster.machines) for k in range(len(cluster.resources))]
        largest = ", ".join(f"{r}={c:g}" for r, c in zip(cluster.resources, most, strict=True))
        machines = "the machine has" if len(cluster.machines) == 1 else "no machine has more than"
        self.problem = f"job {job.id} needs {demand} but {machines} {largest}"
        super().__init__(self.describe())

    def describe(self, source: str = "", line: int | None = None, fix: str = "drop_oversized=True") -> str:
        """``FILE:LINE: job 7 needs nodes=50 but the machine has nodes=10; FIX skips such jobs``."""
        where = f"{source}:{line}: " if source and line else f"{source}: " if source else ""
        return f"{where}{self.problem}; {fix} skips such jobs"


def validate_jobs(jobs: Sequence[Job], cluster: Cluster, drop_oversized: bool = False) -> tuple[list[Job], int]:
    """Check ids are unique and every job fits on some machine.

    Returns the jobs to simulate and the number dropped as oversized (only with ``drop_oversized``).
    """
    seen: set[int] = set()
    kept: list[Job] = []
    dropped = 0
    for job in jobs:
        if job.id in seen:
            raise InputError(f"job {job.id}: duplicate job id")
        seen.add(job.id)
        if len(job.demand) != len(cluster.resources):
            raise InputError(f"job {job.id}: demand {job.demand} does not match resources {cluster.resources}")
        if not cluster.fits_anywhere(job.demand):
            if drop_oversized:
                dropped += 1
                continue
            raise OversizedJobError(job, cluster)
        kept.append(job)
    missing = {p for job in kept for p in job.parents} - {job.id for job in kept}
    if missing:
        raise InputError(f"parent task ids {sorted(missing)[:5]} are not in the workload (or were dropped)")
    return kept, dropped


def simulate(
    jobs: Sequence[Job],
    cluster: Cluster,
    policy: Policy,
    kill_at_limit: bool = False,
    check: bool | None = None,
    workflows: Iterable[Workflow] = (),
) -> SimulationResult:
    """Run ``policy`` on ``jobs`` and return the schedule, every record kept (in input order).

    A job occupies its resources for its ``runtime`` (``min(runtime, time_limit)`` with
    ``kill_at_limit``). ``workflows`` are the workflows the tasks among ``jobs`` belong to (a task
    arrives at its workflow's arrival); the result's stats hold what the policy kept for each. Raises
    :class:`SchedulingError` if the policy breaks a rule (starts a job twice, before its submission,
    its workflow's earliest start or its parents' completion, on a machine that does not exist or
    where it does not fit) and if jobs remain that the policy never starts. ``check`` runs the
    independent invariant checker on the result (default: on when ``SCHEDLAB_CHECK_INVARIANTS`` is
    set, as in the test suite).
    """
    workflows = tuple(workflows)
    given = {wf.id: wf for wf in workflows}
    arrivals: list[Arrival] = []
    tasks: dict[int, list[Job]] = {}  # workflow id → its tasks among jobs
    for job in sorted(jobs, key=lambda job: (job.submit, job.id)):
        wf = given.get(job.workflow)
        if wf is None:
            arrivals.append((job.submit, None, (job,)))
            continue
        if job.submit != wf.arrival:
            raise InputError(f"task {job.id} is submitted at {job.submit} but its workflow {wf.id} arrives at "
                             f"{wf.arrival}")
        if wf.id not in tasks:
            tasks[wf.id] = []
            arrivals.append((wf.arrival, wf, tasks[wf.id]))
        tasks[wf.id].append(job)
    kept = _Kept()
    passes, stats = _run(iter(arrivals), cluster, policy, kill_at_limit, kept)
    result = SimulationResult([kept.records[job.id] for job in jobs], cluster, policy.name, passes,
                              PolicyStats(stats.counters, kept.seconds, kept.values), workflows)
    if check if check is not None else checks_enabled():
        check_schedule(jobs, result, getattr(policy, "queue_key", None) if policy.preserves_order else None)
    return result


def simulate_stream(workflows: Iterable[Workflow], cluster: Cluster, policy: Policy, recorder: Recorder,
                    kill_at_limit: bool = False, check: bool | None = None) -> tuple[int, PolicyStats]:
    """Run ``policy`` on ``workflows`` (in (arrival, id) order, each taken from the iterable when the
    run reaches its arrival), telling ``recorder`` what happens; nothing else is kept. Returns the
    number of scheduling passes and the policy's statistics. Each workflow is checked as it arrives
    (:func:`check_workflow`); rules and ``check`` as in :func:`simulate`.
    """
    if not (check if check is not None else checks_enabled()):
        return _run(_arrivals(workflows, cluster), cluster, policy, kill_at_limit, recorder)
    kept = _Kept()
    passes, stats = _run(_arrivals(workflows, cluster), cluster, policy, kill_at_limit, _Both(recorder, kept))
    tasks = [task for wf in kept.workflows for task in wf.tasks]
    check_schedule(tasks, SimulationResult([kept.records[t.id] for t in tasks], cluster, policy.name, passes,
                                           workflows=tuple(kept.workflows)),
                   getattr(policy, "queue_key", None) if policy.preserves_order else None)
    return passes, stats


def check_workflow(wf: Workflow, cluster: Cluster) -> None:
    """Refuse a workflow the engine cannot run: one without tasks, a task of another workflow or
    submitted at another time than the workflow's arrival, a repeated task id, a parent outside the
    workflow, a task no machine can hold."""
    if not wf.tasks:
        raise InputError(f"workflow {wf.id} has no tasks")
    ids = {task.id for task in wf.tasks}
    if len(ids) != len(wf.tasks):
        raise InputError(f"workflow {wf.id}: task ids repeat")
    for task in wf.tasks:
        if task.workflow != wf.id or task.submit != wf.arrival:
            raise InputError(f"workflow {wf.id}: task {task.id} has workflow {task.workflow} and submit "
                             f"{task.submit}; expected {wf.id} and the workflow's arrival {wf.arrival}")
        if not ids.issuperset(task.parents):
            raise InputError(f"workflow {wf.id}: task {task.id} has parents outside its workflow")
    for demand in {task.demand for task in wf.tasks}:
        if len(demand) != len(cluster.resources) or not cluster.fits_anywhere(demand):
            task = next(task for task in wf.tasks if task.demand == demand)
            raise InputError(f"workflow {wf.id}: task {task.id} demand {demand} fits no machine of "
                             f"{cluster.resources} {cluster.machines}")


def _arrivals(workflows: Iterable[Workflow], cluster: Cluster) -> Iterator[Arrival]:
    last: tuple[float, int] | None = None
    for wf in workflows:
        check_workflow(wf, cluster)
        if last is not None and (wf.arrival, wf.id) <= last:
            raise InputError(f"workflow {wf.id} (arrival {wf.arrival}) comes after workflow {last[1]} (arrival "
                             f"{last[0]}): workflows must come in (arrival, id) order")
        last = (wf.arrival, wf.id)
        yield wf.arrival, wf, wf.tasks


@dataclass(slots=True)
class _Kept:
    """A :class:`Recorder` that keeps everything: the workflows, every record by job id, and the
    policy's per-workflow seconds and per-task values merged."""

    workflows: list[Workflow] = field(default_factory=list)
    records: dict[int, JobRecord] = field(default_factory=dict)
    seconds: dict[int, float] = field(default_factory=dict)
    values: dict[str, dict[int, float]] = field(default_factory=dict)

    def arrived(self, workflow: Workflow) -> None:
        self.workflows.append(workflow)

    def started(self, record: JobRecord) -> None:
        self.records[record.job.id] = record

    def finished(self, workflow: Workflow, stats: PolicyStats) -> None:
        self.seconds.update(stats.seconds_by_job)
        for name, values in stats.task_values.items():
            self.values.setdefault(name, {}).update(values)


@dataclass(frozen=True, slots=True)
class _Both:
    """Two recorders told the same things."""

    first: Recorder
    second: Recorder

    def arrived(self, workflow: Workflow) -> None:
        self.first.arrived(workflow)
        self.second.arrived(workflow)

    def started(self, record: JobRecord) -> None:
        self.first.started(record)
        self.second.started(record)

    def finished(self, workflow: Workflow, stats: PolicyStats) -> None:
        self.first.finished(workflow, stats)
        self.second.finished(workflow, stats)


def _not_waiting(job: Job, now: float, running: dict[int, tuple[Job, float, int]], done: set[int],
                 active: dict[int, Workflow]) -> str:
    """Why ``job``, started at ``now``, is not a waiting job of this run. A job of this run submitted by
    ``now`` has arrived, and a workflow's tasks arrive together, so only a task of a workflow that is
    no longer unfinished (its ids forgotten, for memory) leaves the two cases apart."""
    if job.id in running:
        return f"job {job.id} started twice (it has been running since t={running[job.id][1]})"
    if job.id in done:
        return f"job {job.id} started twice (it already ran)"
    if job.submit > now:
        return f"job {job.id} started at {now} before its submission"
    if job.workflow >= 0 and job.workflow not in active:
        return (f"task {job.id} started, but workflow {job.workflow} is not an unfinished workflow of this run: "
                f"the workflow finished (so the task already ran) or the task is not of this run")
    return f"job {job.id} is not a job of this run (no job of that id was submitted)"


def _run(arrivals: Iterator[Arrival], cluster: Cluster, policy: Policy, kill_at_limit: bool,
         recorder: Recorder) -> tuple[int, PolicyStats]:
    n_machines = len(cluster.machines)
    view = EngineView(cluster, [list(cap) for cap in cluster.machines])
    free = view.free
    running = view.running
    active = view.workflows  # arrived, not finished
    policy.attach(view)
    on_complete, on_submit, schedule, next_wakeup = (
        policy.complete, policy.submit, policy.schedule, policy.next_wakeup)
    started, arrived = recorder.started, recorder.arrived
    heappush, heappop = heapq.heappush, heapq.heappop

    pending: dict[int, Job] = {}  # arrived, not started
    done: set[int] = set()  # ended: jobs of no workflow, tasks of unfinished workflows
    left: dict[int, int] = {}  # unfinished workflow → its tasks not ended
    completions: list[tuple[float, int]] = []
    upcoming = next(arrivals, None)
    wakeup: float | None = None
    passes = 0
    stall: Stall | None = None
    latest_plan = -math.inf  # the latest planned end (start + time limit) of a job started so far
    single = len(cluster.machines) == 1 and len(cluster.resources) == 1
    pool = free[0]

    def ended(job: Job, now: float) -> None:
        """Tell the policy; a workflow's last task ends the workflow."""
        on_complete(job, now)
        wf_id = job.workflow
        if wf_id in left:
            left[wf_id] -= 1
            if not left[wf_id]:
                del left[wf_id]
                wf = active.pop(wf_id)
                done.difference_update(task.id for task in wf.tasks)
                recorder.finished(wf, policy.workflow_done(wf_id))

    while True:
        now = completions[0][0] if completions else math.inf
        if upcoming is not None and upcoming[0] < now:
            now = upcoming[0]
        if wakeup is not None and wakeup < now:
            now = wakeup
        if now == math.inf:
            break
        while completions and completions[0][0] == now:
            job_id = heappop(completions)[1]
            job, _, machine = running.pop(job_id)
            if single:
                pool[0] += job.demand[0]
            else:
                capacity = free[machine]
                for r, amount in enumerate(job.demand):
                    capacity[r] += amount
            done.add(job_id)
            ended(job, now)
        if upcoming is not None and upcoming[0] == now:
            batch: list[Job] = []
            while upcoming is not None and upcoming[0] == now:
                _, wf, jobs = upcoming
                if wf is not None:
                    if wf.id in active:
                        raise InputError(f"workflow {wf.id} arrives at {now} while a workflow of that id is unfinished")
                    active[wf.id] = wf
                    left[wf.id] = len(jobs)
                    arrived(wf)
                batch.extend(jobs)
                upcoming = next(arrivals, None)
            batch.sort(key=lambda job: job.id)
            for job in batch:
                if job.id in pending or job.id in running or job.id in done:
                    raise InputError(f"job {job.id}: duplicate job id")
                pending[job.id] = job
                on_submit(job, now)
        passes += 1
        instant: list[Job] = []  # zero-length tasks started (and so completed) in this pass
        for decision in schedule(now):
            job = decision.job
            if pending.pop(job.id, None) is None:
                raise SchedulingError(f"{policy.name}: {_not_waiting(job, now, running, done, active)}")
            if not 0 <= decision.machine < n_machines:
                raise SchedulingError(f"{policy.name}: job {job.id} started on machine {decision.machine}; "
                                      f"the cluster has machines 0..{n_machines - 1}")
            if active and job.workflow in active and active[job.workflow].earliest_start > now:
                raise SchedulingError(f"{policy.name}: task {job.id} started at {now} before its workflow's "
                                      f"earliest start {active[job.workflow].earliest_start}")
            if job.parents and not done.issuperset(job.parents):
                raise SchedulingError(f"{policy.name}: task {job.id} started before its parents finished")
            duration = min(job.runtime, job.time_limit) if kill_at_limit else job.runtime
            if now + duration == now and job.workflow >= 0:
                started(JobRecord(job, now, now, decision.machine))
                done.add(job.id)
                instant.append(job)
                continue
            if single:
                if job.demand[0] > pool[0]:
                    raise SchedulingError(
                        f"{policy.name}: job {job.id} needs {job.demand[0]} at t={now}, {pool[0]} free")
                pool[0] -= job.demand[0]
            else:
                capacity = free[decision.machine]
                if any(d > c for d, c in zip(job.demand, capacity, strict=True)):
                    raise SchedulingError(
                        f"{policy.name}: job {job.id} demand {job.demand} does not fit machine "
                        f"{decision.machine} (free {capacity}) at t={now}")
                for r, amount in enumerate(job.demand):
                    capacity[r] -= amount
            started(JobRecord(job, now, now + duration, decision.machine))
            running[job.id] = (job, now, decision.machine)
            heappush(completions, (now + duration, job.id))
            if now + job.time_limit > latest_plan:
                latest_plan = now + job.time_limit
        for job in instant:
            ended(job, now)
        wakeup = next_wakeup(now)
        if wakeup is not None and wakeup <= now:
            raise SchedulingError(f"{policy.name}: wake-up {wakeup} is not after now ({now})")
        if running or upcoming is not None or not pending:
            stall = None
        elif stall is None or stall.waiting != len(pending):
            stall = Stall(now, len(pending))
        elif stall.stuck(now, latest_plan, pending.values(), active.values()):
            raise SchedulingError(f"{policy.name}: {stall.describe(now)}")

    if pending:
        raise SchedulingError(f"{policy.name}: {len(pending)} jobs never started (first: {list(pending)[:5]})")
    stats = policy.stats()
    if stats.seconds_by_job or any(stats.task_values.values()):
        raise SchedulingError(f"{policy.name}: stats() reports per-workflow values; a policy hands those over "
                              f"per workflow, from workflow_done()")
    return passes, stats
