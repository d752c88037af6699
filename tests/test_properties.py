"""Hypothesis properties of the backfilling policies on random traces.

Invariants (capacity, each job once, never before submission, fcfs order) are checked on every
simulation by the suite-wide switch in ``conftest.py``; these tests add the scheduling science.
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from sim import Cluster, Job, rigid_job, simulate
from sim.policies import policy_from_conf
from sim.policies.loading import policy_names
from sim.policies.profile import ProfileBackfill
from tests.reference import seed_pseudocode

BACKFILLING = ["fcfs", "easy", "conservative", "easy_classic", "conservative_classic"]
NODES = 16


@st.composite
def traces(draw, nodes: int = NODES, max_jobs: int = 25, exact: bool = False) -> list[Job]:
    """Random rigid jobs on integer times; run time ≤ limit unless ``exact`` (then equal)."""
    count = draw(st.integers(1, max_jobs))
    jobs = []
    for i in range(count):
        limit = draw(st.integers(1, 60))
        runtime = limit if exact else draw(st.integers(0, limit))
        jobs.append(rigid_job(i, draw(st.integers(0, 120)), draw(st.integers(1, nodes)), limit, runtime))
    return jobs


def starts(policy: str, jobs: list[Job], nodes: int = NODES, order: str = "fcfs") -> dict[int, tuple[float, float]]:
    result = simulate(jobs, Cluster.nodes(nodes), policy_from_conf(policy, order=order))
    return {r.job.id: (r.start, r.end) for r in result.records}


def test_backfilling_policies_are_registered() -> None:
    assert set(BACKFILLING) <= set(policy_names())


@settings(max_examples=150, deadline=None)
@given(traces(), st.sampled_from(BACKFILLING), st.sampled_from(["fcfs", "sjf", "ljf"]))
def test_invariants_hold_for_every_policy_and_order(jobs: list[Job], policy: str, order: str) -> None:
    schedule = starts(policy, jobs, order=order)  # the invariant checker runs inside simulate
    assert len(schedule) == len(jobs)


@settings(max_examples=60, deadline=None)
@given(traces(), st.sampled_from(BACKFILLING))
def test_overrunning_jobs_and_kill_at_limit(jobs: list[Job], policy: str) -> None:
    """Jobs that run past their limit keep their nodes, or end at the limit with ``kill_at_limit``."""
    overrun = [Job(j.id, j.submit, j.demand, j.time_limit, j.time_limit * 1.5 + 1) for j in jobs]
    kept = simulate(overrun, Cluster.nodes(NODES), policy_from_conf(policy))
    killed = simulate(overrun, Cluster.nodes(NODES), policy_from_conf(policy), kill_at_limit=True)
    assert all(r.end - r.start == r.job.runtime for r in kept.records)
    assert all(r.end - r.start == r.job.time_limit for r in killed.records)


@settings(max_examples=150, deadline=None)
@given(traces(), st.sampled_from(["fcfs", "easy", "conservative"]))
def test_fast_policies_match_the_literal_seed_pseudocode(jobs: list[Job], policy: str) -> None:
    expected = seed_pseudocode.run(policy, [(j.id, j.submit, j.nodes, j.time_limit, j.runtime) for j in jobs], NODES)
    assert starts(policy, jobs) == expected


@settings(max_examples=80, deadline=None)
@given(traces(), st.integers(1, 10_000), st.sampled_from(BACKFILLING))
def test_shifting_submit_times_shifts_the_schedule(jobs: list[Job], shift: int, policy: str) -> None:
    moved = [Job(j.id, j.submit + shift, j.demand, j.time_limit, j.runtime) for j in jobs]
    base, shifted = starts(policy, jobs), starts(policy, moved)
    assert shifted == {i: (s + shift, e + shift) for i, (s, e) in base.items()}


@settings(max_examples=80, deadline=None)
@given(traces(), st.sampled_from(BACKFILLING))
def test_whole_machine_jobs_make_every_policy_fcfs(jobs: list[Job], policy: str) -> None:
    wide = [Job(j.id, j.submit, (NODES,), j.time_limit, j.runtime) for j in jobs]
    assert starts(policy, wide) == starts("fcfs", wide)


@settings(max_examples=60, deadline=None)
@given(traces(), st.sampled_from(BACKFILLING))
def test_unbounded_machine_means_no_waiting(jobs: list[Job], policy: str) -> None:
    big = sum(j.nodes for j in jobs)
    assert all(s == jobs[i].submit for i, (s, _) in starts(policy, jobs, nodes=big).items())


@settings(max_examples=150, deadline=None)
@given(traces(exact=True), st.sampled_from(["fcfs", "sjf", "ljf"]))
def test_conservative_classic_honours_first_reservations(jobs: list[Job], order: str) -> None:
    """With exact run times no job starts later than the first reservation it was given."""
    policy = policy_from_conf("conservative_classic", order=order)
    assert isinstance(policy, ProfileBackfill)
    result = simulate(jobs, Cluster.nodes(NODES), policy)
    for r in result.records:
        assert r.start <= policy.promised[r.job.id], (r.job.id, r.start, policy.promised[r.job.id])


@settings(max_examples=100, deadline=None)
@given(traces())
def test_conservative_classic_never_delays_a_reservation_under_early_completion(jobs: list[Job]) -> None:
    """Compression only moves reservations earlier, also when jobs end before their limits."""
    policy = policy_from_conf("conservative_classic")
    result = simulate(jobs, Cluster.nodes(NODES), policy)
    assert all(r.start <= policy.promised[r.job.id] for r in result.records)
