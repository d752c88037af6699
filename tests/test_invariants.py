"""The invariant checker catches each kind of broken schedule (hand-built bad results)."""

from __future__ import annotations

import pytest

from sim import Cluster, JobRecord, SimulationResult, rigid_job
from sim.invariants import InvariantViolation, check_schedule
from sim.policies.queue_order import QUEUE_ORDERS

JOBS = [rigid_job(0, 0, 6, 10), rigid_job(1, 5, 6, 10)]


def result(*records: JobRecord) -> SimulationResult:
    return SimulationResult(list(records), Cluster.nodes(10), "hand-made", 0)


def test_a_valid_schedule_passes() -> None:
    check_schedule(JOBS, result(JobRecord(JOBS[0], 0, 10), JobRecord(JOBS[1], 10, 20)), QUEUE_ORDERS["fcfs"])


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ((JobRecord(JOBS[0], 0, 10), JobRecord(JOBS[1], 5, 15)), "over capacity at t=5"),
        ((JobRecord(JOBS[0], 0, 10), JobRecord(JOBS[1], 2, 12)), "submit 5.0, start 2"),
        ((JobRecord(JOBS[0], 0, 10),), "2 jobs in, 1 distinct records out"),
        ((JobRecord(JOBS[0], 0, 10), JobRecord(JOBS[0], 10, 20)), "2 jobs in, 1 distinct records out"),
    ],
)
def test_violations_are_reported(records: tuple[JobRecord, ...], message: str) -> None:
    with pytest.raises(InvariantViolation, match=message):
        check_schedule(JOBS, result(*records))


def test_queue_order_violation() -> None:
    narrow = [rigid_job(0, 0, 6, 10), rigid_job(1, 1, 6, 10), rigid_job(2, 2, 2, 5)]
    records = (JobRecord(narrow[0], 0, 10), JobRecord(narrow[1], 10, 20), JobRecord(narrow[2], 2, 7))
    check_schedule(narrow, result(*records))  # fine for a backfilling policy
    with pytest.raises(InvariantViolation, match="job 2 started at 2"):
        check_schedule(narrow, result(*records), QUEUE_ORDERS["fcfs"])


def test_engine_enforces_precedence_and_missing_parents_are_an_error() -> None:
    """A policy unaware of DAGs (fcfs_multi) is stopped when it starts a task before its parent ends."""
    from sim import Job, SchedulingError, simulate
    from sim.core import InputError
    from sim.engine import validate_jobs
    from sim.policies import policy_from_conf

    cluster = Cluster.slotted(2, 2)
    tasks = [Job(0, 0, (1,), 10, 10, workflow=0), Job(1, 0, (1,), 5, 5, workflow=0, parents=(0,))]
    kept, _ = validate_jobs(tasks, cluster)
    with pytest.raises(SchedulingError, match="task 1 started before its parents finished"):
        simulate(kept, cluster, policy_from_conf("fcfs_multi"))
    with pytest.raises(InputError, match=r"parent task ids \[0\]"):
        validate_jobs([Job(0, 0, (3,), 10, 10), Job(1, 0, (1,), 5, 5, parents=(0,))], cluster, drop_oversized=True)
