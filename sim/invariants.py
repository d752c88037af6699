"""Independent checks of a finished schedule (tests switch them on for every simulation).

They recompute everything from the records alone, so a bug in the engine's own bookkeeping cannot
hide: every job started exactly once, on a machine that exists, never before its submission, its
workflow's earliest start or the end of its parents, no machine's capacity exceeded at any
instant, and — for order-preserving policies such as ``fcfs`` — no job started before a job ahead of it in the queue.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Sequence

from sim.core import Job, JobRecord, SimulationResult

#: Environment switch read by :func:`checks_enabled` (the test suite sets it).
CHECK_ENV = "SCHEDLAB_CHECK_INVARIANTS"


class InvariantViolation(AssertionError):
    """A schedule broke a rule every policy must respect."""


def checks_enabled() -> bool:
    """Whether ``SCHEDLAB_CHECK_INVARIANTS`` asks for checks on every simulation."""
    return os.environ.get(CHECK_ENV, "") not in ("", "0", "false")


def check_schedule(
    jobs: Sequence[Job],
    result: SimulationResult,
    queue_key: Callable[[Job], tuple] | None = None,
) -> None:
    """Raise :class:`InvariantViolation` on the first broken rule.

    ``queue_key`` (given for order-preserving policies) is the queue order jobs must start in.
    """
    records = result.records
    by_id = {r.job.id: r for r in records}
    if len(records) != len(jobs) or len(by_id) != len(records) or set(by_id) != {j.id for j in jobs}:
        raise InvariantViolation(f"{result.policy}: {len(jobs)} jobs in, {len(by_id)} distinct records out")
    release = {task.id: wf.earliest_start for wf in result.workflows for task in wf.tasks}
    machines = len(result.cluster.machines)
    for r in records:
        if not r.job.submit <= r.start <= r.end:
            raise InvariantViolation(
                f"{result.policy}: job {r.job.id} submit {r.job.submit}, start {r.start}, end {r.end}")
        if not 0 <= r.machine < machines:
            raise InvariantViolation(f"{result.policy}: job {r.job.id} on machine {r.machine} of {machines}")
        if r.start < release.get(r.job.id, r.start):
            raise InvariantViolation(f"{result.policy}: task {r.job.id} started at {r.start} before its "
                                     f"workflow's earliest start {release[r.job.id]}")
        for parent in r.job.parents:
            if by_id[parent].end > r.start:
                raise InvariantViolation(f"{result.policy}: task {r.job.id} started before parent {parent} ended")
    _check_capacity(records, result)
    if queue_key is not None:
        _check_queue_order(records, queue_key, result.policy)


def _check_queue_order(records: Sequence[JobRecord], queue_key: Callable[[Job], tuple], policy: str) -> None:
    """No job starts while a job ahead of it in the queue, already submitted, still waits.

    In queue order, job b is violated by an earlier job a with ``submit(a) <= start(b) < start(a)``;
    a Fenwick tree over submit times keeps the latest start among earlier jobs, O(n log n).
    """
    submits = sorted({r.job.submit for r in records})
    tree = [float("-inf")] * (len(submits) + 1)
    for r in sorted(records, key=lambda r: queue_key(r.job)):
        i = bisect.bisect_right(submits, r.start)  # earlier jobs submitted at or before r.start
        latest = float("-inf")
        while i > 0:
            latest = max(latest, tree[i])
            i -= i & -i
        if latest > r.start:
            raise InvariantViolation(f"{policy}: job {r.job.id} started at {r.start} while a job ahead of it "
                                     f"in the queue waited (it started at {latest})")
        i = bisect.bisect_left(submits, r.job.submit) + 1
        while i <= len(submits):
            tree[i] = max(tree[i], r.start)
            i += i & -i


def _check_capacity(records: Sequence[JobRecord], result: SimulationResult) -> None:
    """Sweep over start/end instants per machine; ends release before starts at the same instant."""
    events = sorted(
        [(r.end, 0, r.machine, r.job.demand) for r in records if r.end > r.start]
        + [(r.start, 1, r.machine, r.job.demand) for r in records if r.end > r.start],
        key=lambda e: (e[0], e[1]),
    )
    machines = result.cluster.machines
    used = [[0.0] * len(result.cluster.resources) for _ in machines]
    for time, kind, machine, demand in events:
        sign = 1 if kind else -1
        for k, amount in enumerate(demand):
            used[machine][k] += sign * amount
            if used[machine][k] > machines[machine][k] + 1e-9:
                raise InvariantViolation(
                    f"{result.policy}: machine {machine} {result.cluster.resources[k]} over capacity at t={time} "
                    f"({used[machine][k]} > {machines[machine][k]})")
