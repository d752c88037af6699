"""Every worked example of the backfilling seed (000_82efb2ca4b7e1bb1), with exact times."""

from __future__ import annotations

import pytest

from sim import Cluster, rigid_job, simulate
from sim.policies import policy_from_conf
from sim.policies.backfill import RunningEnds


def schedule(policy: str, jobs, nodes: int = 100) -> dict[int, tuple[float, float]]:
    result = simulate(jobs, Cluster.nodes(nodes), policy_from_conf(policy))
    return {r.job.id: (r.start, r.end) for r in result.records}


def running(*jobs: tuple[float, int]) -> RunningEnds:
    ends = RunningEnds()
    for job_id, (end, nodes) in enumerate(jobs):
        ends.add(end, job_id, nodes)
    return ends


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_complete_example_trace(policy: str) -> None:
    """'Complete Example Trace': Job 2 backfills at t=20 (20+50 < 200), Job 1 starts at 200."""
    jobs = [rigid_job(0, 0, 70, 200), rigid_job(1, 10, 50, 300), rigid_job(2, 20, 20, 50)]
    assert schedule(policy, jobs) == {0: (0, 200), 1: (200, 500), 2: (20, 70)}


def test_reservation_timeline_example() -> None:
    """Head needs 50, 30 free; C (15) ends 80, A (20) ends 100, B (25) ends 150 → reservation 100."""
    assert running((100, 20), (150, 25), (80, 15)).shadow(50, free=30, now=0) == 100


def test_reservation_needs_several_jobs() -> None:
    """Edge case 2: A (30) ends 100, B (40) ends 200, 30 free, head needs 70 → t=200."""
    assert running((100, 30), (200, 40)).shadow(70, free=30, now=0) == 200


def test_shadow_of_a_job_that_fits_now_is_now() -> None:
    """CONSERVATIVE example: Job 4 (15 nodes, 20 free) has reservation t=0 (now)."""
    assert running((50, 60), (100, 20)).shadow(15, free=20, now=0) == 0


def test_unrealistic_identical_reservations() -> None:
    """A (60 nodes) ends 50, 20 free: jobs of 50, 30 and 40 nodes all get shadow time 50."""
    ends = running((50, 60))
    assert [ends.shadow(n, free=20, now=0) for n in (50, 30, 40)] == [50, 50, 50]


def test_easy_backfilling_example() -> None:
    """A (60) runs to 200; B (50) blocked at t=50 with reservation 200; D and E backfill, C does not.

    D (20 nodes, limit 100) ends 150 < 200 and E (15, 70) ends 120 < 200; C (30) does not fit in the
    5 nodes left. B starts when A ends at 200; C, now the head, fits beside it at 200.
    """
    jobs = [
        rigid_job(0, 0, 60, 200),  # A
        rigid_job(1, 50, 50, 100),  # B
        rigid_job(2, 50, 20, 100),  # D
        rigid_job(3, 50, 15, 70),  # E
        rigid_job(4, 50, 30, 100),  # C
    ]
    got = schedule("easy", jobs)
    assert got[0] == (0, 200)
    assert got[2] == (50, 150)
    assert got[3] == (50, 120)
    assert got[1] == (200, 300)
    assert got[4] == (200, 300)


def test_backfill_must_end_strictly_before_reservation() -> None:
    """Q3: ``completion < reservation``; the textbook EASY accepts ``<=`` (ends exactly at shadow)."""
    jobs = [rigid_job(0, 0, 70, 200), rigid_job(1, 10, 50, 300), rigid_job(2, 20, 20, 180)]
    assert schedule("easy", jobs)[2] == (200, 380)  # 20 + 180 = 200, not < 200
    assert schedule("easy_classic", jobs)[2] == (20, 200)


def test_head_that_fits_starts_even_if_it_outlasts_running_jobs() -> None:
    """Q1: the FCFS head starts immediately when it fits; a backfiller that would delay it does not."""
    jobs = [rigid_job(0, 0, 50, 100), rigid_job(1, 0, 50, 1000)]
    assert schedule("easy", jobs) == {0: (0, 100), 1: (0, 1000)}


def test_early_completion_reschedules_immediately() -> None:
    """Job 0 (limit 200, actual 50) ends at 50; the blocked job starts then, not at 200."""
    jobs = [rigid_job(0, 0, 60, 200, runtime=50), rigid_job(1, 10, 50, 100)]
    for policy in ("easy", "conservative", "easy_classic", "conservative_classic"):
        assert schedule(policy, jobs)[1] == (50, 150), policy


def test_easy_vs_conservative_scenario() -> None:
    """Job 0 (60) ends 50, Job 1 (20) ends 100; queue 2 (50), 3 (30), 4 (15), 5 (10, limit 40).

    EASY protects only Job 2 (reservation 50): Job 5 backfills at t=0, ending at 40.
    CONSERVATIVE also protects Job 4, whose reservation is t=0 (it fits now): Job 5 must wait.
    """
    jobs = [
        rigid_job(0, 0, 60, 50),
        rigid_job(1, 0, 20, 100),
        rigid_job(2, 0, 50, 200),
        rigid_job(3, 0, 30, 50),
        rigid_job(4, 0, 15, 100),
        rigid_job(5, 0, 10, 40),
    ]
    easy = schedule("easy", jobs)
    conservative = schedule("conservative", jobs)
    assert easy[5] == (0, 40)
    assert conservative[5][0] > 0
    assert conservative[4][0] > 0  # Job 4 cannot backfill either: 0 + 100 is not before t=50
    # Job 0 and Job 1 fill 80 nodes at t=0: Job 2 (50) is the blocked head in both.
    assert easy[0] == conservative[0] == (0, 50)
    assert easy[1] == conservative[1] == (0, 100)
    assert easy[2] == conservative[2] == (50, 250)


def test_fcfs_never_backfills() -> None:
    jobs = [rigid_job(0, 0, 70, 200), rigid_job(1, 10, 50, 300), rigid_job(2, 20, 20, 50)]
    assert schedule("fcfs", jobs) == {0: (0, 200), 1: (200, 500), 2: (200, 250)}
