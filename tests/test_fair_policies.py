"""The online multi-resource policies on small hand-built traces, with exact start times."""

from __future__ import annotations

import pytest

from sim.core import Cluster, InputError, Job
from sim.engine import simulate
from sim.policies import policy_from_conf
from sim.policies.base import EngineView
from sim.policies.fair_share import FairShare, FcfsMulti
from tests.test_fair_invariants import NAMES

POOL_9_18 = Cluster(("cpu", "mem"), ((9, 18),))


def tasks(user: str, demand: tuple[float, ...], count: int, first_id: int, submit: float = 0.0,
          duration: float = 10.0) -> list[Job]:
    return [Job(first_id + k, submit, demand, duration, duration, user) for k in range(count)]


def starts(jobs: list[Job], cluster: Cluster, policy) -> dict[int, float]:
    return {r.job.id: r.start for r in simulate(jobs, cluster, policy).records}


def by_user(jobs: list[Job], cluster: Cluster, policy) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in sorted(simulate(jobs, cluster, policy).records, key=lambda r: r.job.id):
        out.setdefault(r.job.user, []).append(r.start)
    return out


def grant_order(jobs: list[Job], cluster: Cluster, policy) -> list[str]:
    """The users of one scheduling pass's decisions, in order (policy driven by hand)."""
    policy.attach(EngineView(cluster, [list(m) for m in cluster.machines], {}))
    for job in jobs:
        policy.submit(job, 0.0)
    return [start.job.user for start in policy.schedule(0.0)]


def test_seed_example_online_drf() -> None:
    """(9, 18), five tasks each of A (1, 4) and B (3, 1), all 10 s: A 3 and B 2 run at once (the
    static allocation); at 10 s all end and filling restarts from zero shares."""
    jobs = tasks("A", (1, 4), 5, 0) + tasks("B", (3, 1), 5, 5)
    assert by_user(jobs, POOL_9_18, policy_from_conf("drf")) == {
        "A": [0, 0, 0, 10, 10], "B": [0, 0, 10, 10, 20]}
    assert grant_order(jobs, POOL_9_18, FairShare()) == ["A", "B", "A", "B", "A"]


def test_seed_tiny_example_grant_order() -> None:
    jobs = tasks("A", (3, 1), 4, 0) + tasks("B", (1, 3), 4, 4)
    assert grant_order(jobs, Cluster(("cpu", "mem"), ((12, 12),)), FairShare()) == ["A", "B"] * 3


def test_baselines_on_the_seed_example() -> None:
    jobs = tasks("A", (1, 4), 5, 0) + tasks("B", (3, 1), 5, 5)
    assert by_user(jobs, POOL_9_18, policy_from_conf("fcfs_multi")) == {
        "A": [0, 0, 0, 0, 10], "B": [10, 10, 20, 20, 20]}
    assert by_user(jobs, POOL_9_18, policy_from_conf("cpu_fair")) == {
        "A": [0, 0, 0, 0, 10], "B": [0, 10, 10, 20, 20]}
    assert by_user(jobs, POOL_9_18, policy_from_conf("asset_fair")) == {
        "A": [0, 0, 0, 10, 10], "B": [0, 0, 10, 10, 20]}


def test_weighted_drf() -> None:
    jobs = tasks("A", (1, 1), 10, 0) + tasks("B", (1, 1), 10, 10)
    cluster = Cluster(("cpu", "mem"), ((12, 12),))
    weighted = by_user(jobs, cluster, policy_from_conf("drf_weighted", weights={"A": 2.0}))
    assert weighted == {"A": [0] * 8 + [10, 10], "B": [0] * 4 + [10] * 6}
    assert by_user(jobs, cluster, policy_from_conf("drf")) == {"A": [0] * 6 + [10] * 4, "B": [0] * 6 + [10] * 4}


def test_a_late_user_gets_freed_resources_first() -> None:
    """(4, 4): A's four (1, 1) tasks end at 10, 20, 30, 40; B arrives at 5 with three tasks. Each
    freed slot goes to the lower dominant share: B at 10 (A 3/4 vs B 0) and 20 (2/4 vs 1/4), then
    A's queued task at 30 (A 1/4 < B 2/4), then B at 40."""
    cluster = Cluster(("cpu", "mem"), ((4, 4),))
    a = [Job(k, 0.0, (1, 1), 10.0 * (k + 1), 10.0 * (k + 1), "A") for k in range(4)]
    a.append(Job(4, 0.0, (1, 1), 100.0, 100.0, "A"))
    b = tasks("B", (1, 1), 3, 10, submit=5.0, duration=100.0)
    assert starts(a + b, cluster, policy_from_conf("drf")) == {
        0: 0, 1: 0, 2: 0, 3: 0, 4: 30, 10: 10, 11: 20, 12: 40}


def test_a_user_whose_head_does_not_fit_is_skipped_and_stays_eligible() -> None:
    """(4, 4): A (3, 3) starts; B's (2, 2) does not fit and is skipped, C's (1, 1) starts; when A
    ends at 10, B starts. FIFO per user: B's later small task waits behind its head."""
    cluster = Cluster(("cpu", "mem"), ((4, 4),))
    jobs = [Job(0, 0, (3, 3), 10, 10, "A"), Job(1, 0, (2, 2), 10, 10, "B"), Job(2, 0, (1, 1), 5, 5, "B"),
            Job(3, 0, (1, 1), 10, 10, "C")]
    assert starts(jobs, cluster, policy_from_conf("drf")) == {0: 0, 1: 10, 2: 10, 3: 0}
    # fcfs_multi blocks at B's head: C waits too.
    assert starts(jobs, cluster, policy_from_conf("fcfs_multi")) == {0: 0, 1: 10, 2: 10, 3: 10}


def test_strict_mode_blocks_behind_the_lowest_share() -> None:
    """(4, 4): A (3, 3) starts; B's (2, 2), lowest share, does not fit. Skipping (default), C's
    (1, 1) starts at once; strict (the paper's Algorithm 1) holds C — and D, arriving at 1 when a
    (1, 1) slot is free — behind B until A ends at 10."""
    cluster = Cluster(("cpu", "mem"), ((4, 4),))
    jobs = [Job(0, 0, (3, 3), 10, 10, "A"), Job(1, 0, (2, 2), 10, 10, "B"), Job(2, 0, (1, 1), 10, 10, "C"),
            Job(3, 1, (1, 1), 10, 10, "D")]
    assert starts(jobs, cluster, policy_from_conf("drf")) == {0: 0, 1: 10, 2: 0, 3: 10}
    assert starts(jobs, cluster, policy_from_conf("drf", strict=True)) == {0: 0, 1: 10, 2: 10, 3: 10}


def test_arrivals_while_blocked_start_when_capacity_frees() -> None:
    cluster = Cluster(("cpu", "mem"), ((4, 4),))
    jobs = [Job(0, 0, (4, 4), 10, 10, "A"), Job(1, 1, (1, 1), 10, 10, "C"), Job(2, 2, (1, 1), 10, 10, "B"),
            Job(3, 3, (4, 1), 10, 10, "A")]
    # (4, 4): A's (4, 4) runs to 10; C, B, then A's (4, 1) arrive and wait. At 10 every share is 0 and
    # the tie goes to A by name: its (4, 1) takes all the CPU, so B and C start at 20. fcfs_multi
    # starts C and B (arrival order) at 10 and A's task at 20.
    assert starts(jobs, cluster, policy_from_conf("drf")) == {0: 0, 1: 20, 2: 20, 3: 10}
    assert starts(jobs, cluster, policy_from_conf("fcfs_multi")) == {0: 0, 1: 10, 2: 10, 3: 20}


def test_cpu_fair_lets_a_memory_heavy_user_monopolise_memory_online() -> None:
    """(12, 12), A (1 CPU, 3 GB), B (2, 2): cpu_fair runs A 3 (9 GB) and B 1; DRF runs A 2, B 3."""
    cluster = Cluster(("cpu", "mem"), ((12, 12),))
    jobs = tasks("A", (1, 3), 6, 0, duration=100) + tasks("B", (2, 2), 6, 6, duration=100)
    for name, expected in (("cpu_fair", {"A": 3, "B": 1}), ("drf", {"A": 2, "B": 3})):
        running = {u: sum(s == 0 for s in v) for u, v in by_user(jobs, cluster, policy_from_conf(name)).items()}
        assert running == expected


def test_asset_fair_breaks_sharing_incentive_online() -> None:
    """(30, 30), A (1, 1), B (3, 1): asset fairness runs 12 A tasks where half the cluster holds 15."""
    cluster = Cluster(("cpu", "mem"), ((30, 30),))
    jobs = tasks("A", (1, 1), 20, 0, duration=100) + tasks("B", (3, 1), 20, 20, duration=100)
    for name, a_running in (("asset_fair", 12), ("drf", 15)):
        assert sum(s == 0 for s in by_user(jobs, cluster, policy_from_conf(name))["A"]) == a_running


def test_cpu_fair_resource_is_configurable() -> None:
    cluster = Cluster(("cpu", "mem"), ((12, 12),))
    jobs = tasks("A", (1, 3), 6, 0, duration=100) + tasks("B", (2, 2), 6, 6, duration=100)
    mem_fair = by_user(jobs, cluster, policy_from_conf("cpu_fair", resource="mem"))
    assert {u: sum(s == 0 for s in v) for u, v in mem_fair.items()} == {"A": 2, "B": 3}
    with pytest.raises(InputError, match="gpu"):
        simulate(jobs, cluster, policy_from_conf("cpu_fair", resource="gpu"))


@pytest.mark.parametrize(("placement", "expected"), [("best_fit", {0: 0, 1: 0}), ("first_fit", {0: 0, 1: 100})])
def test_placement_rule(placement: str, expected: dict[int, float]) -> None:
    """Machines (4, 4) and (2, 2). best_fit puts the (2, 2) task on the small machine, leaving room
    for the (4, 4) one; first_fit fragments the big machine and the (4, 4) task waits."""
    cluster = Cluster(("cpu", "mem"), ((4, 4), (2, 2)))
    jobs = [Job(0, 0, (2, 2), 100, 100, "A"), Job(1, 0, (4, 4), 100, 100, "B")]
    for name in ("drf", "fcfs_multi"):
        result = simulate(jobs, cluster, policy_from_conf(name, placement=placement))
        assert {r.job.id: r.start for r in result.records} == expected
        assert result.records[0].machine == (1 if placement == "best_fit" else 0)


def test_a_task_must_fit_on_one_machine() -> None:
    """Two (2, 2) machines: two (2, 1) tasks cannot share one machine's CPU, so they go to both."""
    cluster = Cluster(("cpu", "mem"), ((2, 2), (2, 2)))
    jobs = tasks("A", (2, 1), 3, 0)
    result = simulate(jobs, cluster, policy_from_conf("drf", placement="first_fit"))
    assert [(r.start, r.machine) for r in result.records] == [(0, 0), (0, 1), (10, 0)]


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(InputError, match="placement"):
        policy_from_conf("drf", placement="random")
    with pytest.raises(InputError, match="positive weight"):
        policy_from_conf("drf_weighted", weights={"A": 0})
    with pytest.raises(InputError, match="rule"):
        FairShare(rule="max")  # type: ignore[arg-type]


def test_registered_in_conf() -> None:
    policy = policy_from_conf("drf_weighted", weights={"A": 2.0, "B": 1.0}, placement="first_fit")
    assert isinstance(policy, FairShare) and policy.weights == {"A": 2.0, "B": 1.0}
    with pytest.raises(InputError, match="does not accept option 'order'"):  # the queues are FIFO
        policy_from_conf("drf", order="sjf")


def test_policy_attributes() -> None:
    assert FcfsMulti().preserves_order and not FairShare().preserves_order
    for name in NAMES:
        assert policy_from_conf(name).name == ("drf" if name == "drf_weighted" else name)  # weights null: plain DRF
