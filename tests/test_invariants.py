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
