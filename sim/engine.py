"""Discrete-event engine.

Events are completions (a heap of ``(end_time, job_id)``), arrivals (the jobs sorted by
``(submit, id)``) and policy wake-ups. At one instant the engine applies **every completion first
(in job-id order), then every arrival in (submit time, job id) order, then one scheduling pass**;
time then jumps to the next event. There is no global state: the same jobs, cluster and policy give
the same schedule in any process.

**Zero-length workflow tasks** (RM-DCWF places them without a slot; also a task so short that adding
it to the clock changes nothing, e.g. 1e-7 s at t = 1e10, as its planned end says) hold no capacity and are
complete the instant they start: a decision later in the same pass may start their children at
that instant, and the policy hears of their completion right after the pass, before
``next_wakeup`` — so they never cause a second pass at the same instant. (A zero-runtime rigid job
of a trace keeps the older meaning: it holds its nodes for no time and its completion is an event
at the same instant, which gives the queue behind it a second pass there, as DR_EVT does.)

**Workflows**: a task of workflow j (``Job.workflow``) may not start before the workflow's
``earliest_start`` s_j; with ``Workload.workflows`` given, the engine enforces it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from sim.core import Cluster, InputError, Job, JobRecord, SimulationResult, Workflow
from sim.invariants import check_schedule, checks_enabled
from sim.policies.base import EngineView, Policy


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
    workflows: Sequence[Workflow] = (),
) -> SimulationResult:
    """Run ``policy`` on ``jobs`` and return the schedule.

    A job occupies its resources for its ``runtime`` (``min(runtime, time_limit)`` with
    ``kill_at_limit``). Raises :class:`SchedulingError` if the policy breaks a rule (starts a job
    twice, before its submission, its workflow's earliest start or its parents' completion, on a
    machine that does not exist or where it does not fit) and if jobs remain that the policy never
    starts. ``check`` runs the independent invariant checker on
    the result (default: on when ``SCHEDLAB_CHECK_INVARIANTS`` is set, as in the test suite).
    """
    result = _run(jobs, cluster, policy, kill_at_limit, tuple(workflows))
    if check if check is not None else checks_enabled():
        check_schedule(jobs, result, getattr(policy, "queue_key", None) if policy.preserves_order else None)
    return result


def _run(jobs: Sequence[Job], cluster: Cluster, policy: Policy, kill_at_limit: bool,
         workflows: tuple[Workflow, ...]) -> SimulationResult:
    release = {task.id: wf.earliest_start for wf in workflows for task in wf.tasks}
    n_machines = len(cluster.machines)
    arrivals = sorted(jobs, key=lambda job: (job.submit, job.id))
    arrival_times = [job.submit for job in arrivals]
    n_arrivals = len(arrivals)
    index_of = {job.id: i for i, job in enumerate(jobs)}
    view = EngineView(cluster, [list(cap) for cap in cluster.machines], {}, {wf.id: wf for wf in workflows})
    free = view.free
    running = view.running
    policy.attach(view)
    on_complete, on_submit, schedule, next_wakeup = (
        policy.complete, policy.submit, policy.schedule, policy.next_wakeup)
    heappush, heappop = heapq.heappush, heapq.heappop

    starts: list[float] = [math.nan] * len(jobs)
    ends: list[float] = [math.nan] * len(jobs)
    machines: list[int] = [0] * len(jobs)
    done: set[int] = set()
    completions: list[tuple[float, int]] = []
    next_arrival = 0
    wakeup: float | None = None
    passes = 0
    single = len(cluster.machines) == 1 and len(cluster.resources) == 1
    pool = free[0]

    while True:
        now = completions[0][0] if completions else math.inf
        if next_arrival < n_arrivals and arrival_times[next_arrival] < now:
            now = arrival_times[next_arrival]
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
            on_complete(job, now)
        while next_arrival < n_arrivals and arrival_times[next_arrival] == now:
            on_submit(arrivals[next_arrival], now)
            next_arrival += 1
        passes += 1
        instant: list[Job] = []  # zero-length tasks started (and so completed) in this pass
        for decision in schedule(now):
            job = decision.job
            i = index_of[job.id]
            if starts[i] == starts[i]:  # not NaN: already started
                raise SchedulingError(f"{policy.name}: job {job.id} started twice")
            if job.submit > now:
                raise SchedulingError(f"{policy.name}: job {job.id} started at {now} before its submission")
            if not 0 <= decision.machine < n_machines:
                raise SchedulingError(f"{policy.name}: job {job.id} started on machine {decision.machine}; "
                                      f"the cluster has machines 0..{n_machines - 1}")
            if release and release.get(job.id, now) > now:
                raise SchedulingError(f"{policy.name}: task {job.id} started at {now} before its workflow's "
                                      f"earliest start {release[job.id]}")
            if job.parents and not done.issuperset(job.parents):
                raise SchedulingError(f"{policy.name}: task {job.id} started before its parents finished")
            duration = min(job.runtime, job.time_limit) if kill_at_limit else job.runtime
            if now + duration == now and job.workflow >= 0:
                starts[i] = ends[i] = now
                machines[i] = decision.machine
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
            starts[i] = now
            ends[i] = now + duration
            machines[i] = decision.machine
            running[job.id] = (job, now, decision.machine)
            heappush(completions, (now + duration, job.id))
        for job in instant:
            on_complete(job, now)
        wakeup = next_wakeup(now)
        if wakeup is not None and wakeup <= now:
            raise SchedulingError(f"{policy.name}: wake-up {wakeup} is not after now ({now})")

    never = [jobs[i].id for i in range(len(jobs)) if math.isnan(starts[i])]
    if never:
        raise SchedulingError(f"{policy.name}: {len(never)} jobs never started (first: {never[:5]})")
    records = [JobRecord(job, starts[i], ends[i], machines[i]) for i, job in enumerate(jobs)]
    return SimulationResult(records, cluster, policy.name, passes, policy.stats(), workflows)

