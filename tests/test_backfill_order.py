"""``backfill_order``: the order backfill candidates are tried in, apart from the queue order.

The default (None, or the queue order itself) must stay exactly the DR_EVT-verified behaviour; another
order is checked against a literal transcription of the rule (O(n²) per pass, like
``tests/reference/seed_pseudocode.py``), on hand-built cases with exact times, and by the invariant
checker (on for every simulation, ``conftest.py``). CONSERVATIVE refuses another order because it
cannot change its schedule (provably, see ``sim/policies/backfill.py``): the literal rule, which does
not ignore the order, must give the default schedule for every order.
"""

from __future__ import annotations

from collections.abc import Sequence

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from sim import Cluster, InputError, Job, Start, rigid_job, simulate
from sim.policies import policy_from_conf
from sim.policies.backfill import RunningEnds, SeedBackfill
from sim.policies.profile import ProfileBackfill
from sim.policies.queue_order import QUEUE_ORDERS
from tests.test_properties import NODES, starts, traces

ORDERS = list(QUEUE_ORDERS)
BACKFILLING = ["easy", "conservative", "easy_classic"]
Schedule = dict[int, tuple[float, float]]


def run(policy: object, jobs: list[Job], nodes: int = NODES) -> Schedule:
    return {r.job.id: (r.start, r.end) for r in simulate(jobs, Cluster.nodes(nodes), policy).records}


def literal(window: str, order: str, backfill_order: str, jobs: list[Job], total: int) -> Schedule:
    """The rule, literally: start queue heads that fit; then, again and again, the first waiting job in
    backfill order that fits and ends before the earliest shadow time of the head (``head``) or of every
    job still waiting ahead of it in queue order (``ahead``)."""
    queue_key, backfill_key = QUEUE_ORDERS[order], QUEUE_ORDERS[backfill_order]
    pending = sorted(jobs, key=lambda j: (j.submit, j.id))
    waiting: list[Job] = []
    running: dict[int, tuple[Job, float]] = {}
    done: Schedule = {}
    while pending or waiting or running:
        now = min([s + j.runtime for j, s in running.values()] + [j.submit for j in pending[:1]])
        for job_id in sorted(i for i, (j, s) in running.items() if s + j.runtime == now):
            _, start = running.pop(job_id)
            done[job_id] = (start, now)
        while pending and pending[0].submit == now:
            waiting.append(pending.pop(0))
        waiting.sort(key=queue_key)
        while waiting:
            free = total - sum(j.nodes for j, _ in running.values())
            if waiting[0].nodes <= free:
                chosen: Job | None = waiting[0]
            elif window == "none":
                break
            else:
                chosen = next((j for j in sorted(waiting[1:], key=backfill_key)
                               if j.nodes <= free and now + j.time_limit < earliest_shadow(
                                   waiting[:waiting.index(j)] if window == "ahead" else waiting[:1],
                                   running, free, now)), None)
                if chosen is None:
                    break
            waiting.remove(chosen)
            running[chosen.id] = (chosen, now)
    return done


def earliest_shadow(ahead: list[Job], running: dict[int, tuple[Job, float]], free: int, now: float) -> float:
    """The earliest shadow time of the jobs ``ahead``, each computed alone from the running jobs."""
    ends = RunningEnds()
    for job, start in running.values():
        ends.add(start + job.time_limit, job.id, job.nodes)
    return min(ends.shadow(job.nodes, free, now) for job in ahead)


@settings(max_examples=200, deadline=None)
@given(traces(), st.sampled_from(["head", "ahead"]), st.sampled_from(ORDERS), st.sampled_from(ORDERS))
def test_seed_backfill_matches_the_literal_rule(jobs: list[Job], window: str, order: str, backfill: str) -> None:
    """For ``ahead`` (which refuses another order): the literal rule in that order gives the default schedule."""
    policy = SeedBackfill(window, order=order, backfill_order=backfill if window == "head" else None)
    assert run(policy, jobs) == literal(window, order, backfill, jobs, NODES)


@settings(max_examples=150, deadline=None)
@given(traces(), st.sampled_from(BACKFILLING), st.sampled_from(ORDERS))
def test_the_queue_order_as_backfill_order_is_the_default(jobs: list[Job], name: str, order: str) -> None:
    """Named explicitly, or (EASY) forced through the reordering path: the schedule of the verified default."""
    default = run(policy_from_conf(name, order=order), jobs)
    assert run(policy_from_conf(name, order=order, backfill_order=order), jobs) == default
    if name != "conservative":  # which never reorders
        forced = policy_from_conf(name, order=order)
        forced.backfill_key = forced.queue_key  # the reordering path with the queue's own key
        assert run(forced, jobs) == default


EASY_CASE = [
    rigid_job(0, 0, 6, 100),  # runs 0–100
    rigid_job(1, 0, 4, 20),  # runs 0–20: the machine is full until 20
    rigid_job(2, 1, 8, 50),  # the head from t=1: its shadow time is 100 (job 0 ends)
    rigid_job(3, 2, 4, 70),  # candidates at t=20, 4 nodes free: 3 ends at 90 < 100 …
    rigid_job(4, 3, 4, 30),  # … and so does 4 (50): only one of them fits
]


@pytest.mark.parametrize("name", ["easy", "easy_classic"])
@pytest.mark.parametrize(("backfill", "expected"), [
    (None, {3: (20, 90), 4: (150, 180)}),  # fcfs tries 3 first; 4 (90 + 30 > 100) waits for the head
    ("sjf", {3: (150, 220), 4: (20, 50)}),  # the shorter job first; 3 (50 + 70 > 100) waits
])
def test_sjf_backfilling_starts_another_job(name: str, backfill: str | None, expected: Schedule) -> None:
    schedule = run(policy_from_conf(name, backfill_order=backfill), EASY_CASE, nodes=10)
    assert schedule == {0: (0, 100), 1: (0, 20), 2: (100, 150), **expected}


def test_conservative_backfills_the_same_jobs_in_any_order() -> None:
    """CONSERVATIVE, widest first, literally: at t=10, B (3 nodes) would be tried first, but A (1 node, ahead
    of it) fits now, so B's window is now; only once A starts is B's window the head's shadow time (100).
    The default schedule, so the policy refuses the option instead of silently ignoring it."""
    jobs = [rigid_job(0, 0, 6, 100), rigid_job(1, 0, 4, 10), rigid_job(2, 1, 10, 10),  # head 2 waits for 100
            rigid_job(3, 2, 1, 50), rigid_job(4, 3, 3, 60)]  # A, B
    schedule = literal("ahead", "fcfs", "widest", jobs, 10)
    assert schedule == {0: (0, 100), 1: (0, 10), 2: (100, 110), 3: (10, 60), 4: (10, 70)}
    assert schedule == run(policy_from_conf("conservative"), jobs, nodes=10)
    with pytest.raises(InputError, match="conservative backfills the same jobs in any order"):
        policy_from_conf("conservative", backfill_order="widest")


class PromisingEasy(SeedBackfill):
    """EASY that notes, after each pass, the shadow time of the head: the start it promises."""

    def __init__(self, **options: object) -> None:
        super().__init__("head", **options)
        self.waiting: dict[int, Job] = {}
        self.promised: dict[int, float] = {}

    def submit(self, job: Job, now: float) -> None:
        super().submit(job, now)
        self.waiting[job.id] = job

    def schedule(self, now: float) -> Sequence[Start]:
        started = list(super().schedule(now))
        ends = RunningEnds()
        for job, start, _ in self.view.running.values():
            ends.add(start + job.time_limit, job.id, job.nodes)
        for decision in started:
            ends.add(now + decision.job.time_limit, decision.job.id, decision.job.nodes)
            del self.waiting[decision.job.id]
        if self.waiting:
            head = min(self.waiting.values(), key=self.queue_key)
            free = int(self.view.free[0][0]) - sum(d.job.nodes for d in started)
            self.promised.setdefault(head.id, ends.shadow(head.nodes, free, now))
        return started


@settings(max_examples=150, deadline=None)
@given(traces(exact=True), st.sampled_from([None, *ORDERS]))
def test_easy_never_starts_the_head_after_its_reservation(jobs: list[Job], backfill: str | None) -> None:
    """FCFS queue (the head changes only when it starts), exact run times: whatever the backfill order,
    no head starts later than the shadow time it was first given; easy_classic likewise."""
    easy = PromisingEasy(backfill_order=backfill)
    classic = ProfileBackfill(1, backfill_order=backfill)
    for policy in (easy, classic):
        schedule = run(policy, jobs)
        assert all(schedule[i][0] <= t for i, t in policy.promised.items()), policy.name


@settings(max_examples=200, deadline=None)
@given(traces(), st.sampled_from(["fcfs", "easy", "conservative", "easy_classic", "conservative_classic"]),
       st.sampled_from(ORDERS), st.sampled_from([None, *ORDERS]))
def test_invariants_hold_for_every_policy_and_backfill_order(jobs: list[Job], name: str, order: str,
                                                             backfill: str | None) -> None:
    try:
        policy = policy_from_conf(name, order=order, backfill_order=backfill)
    except InputError:
        assert name in ("fcfs", "conservative", "conservative_classic") and backfill not in (None, order)
        return
    assert len(run(policy, jobs)) == len(jobs)  # the invariant checker runs inside simulate


def test_widest_and_narrowest_are_queue_orders_too() -> None:
    jobs = [rigid_job(0, 0, 10, 10), rigid_job(1, 1, 3, 10), rigid_job(2, 1, 8, 10)]  # 1 and 2 do not fit together
    assert starts("fcfs", jobs, nodes=10, order="widest") == {0: (0, 10), 1: (20, 30), 2: (10, 20)}
    assert starts("fcfs", jobs, nodes=10, order="narrowest") == {0: (0, 10), 1: (10, 20), 2: (20, 30)}


@pytest.mark.parametrize(("name", "options", "message"), [
    ("easy", {"order": "random"}, "unknown queue order 'random'; expected one of fcfs, sjf, ljf, widest, narrowest"),
    ("easy", {"backfill_order": "random"}, "unknown backfill order 'random'; expected one of fcfs, sjf, ljf,"),
    ("easy_classic", {"backfill_order": 1}, "unknown backfill order 1; expected one of"),
    ("fcfs", {"backfill_order": "sjf"}, "fcfs never backfills: backfill_order must be null or the queue order "
     "'fcfs', got 'sjf'"),
    ("conservative_classic", {"backfill_order": "sjf"}, "conservative_classic gives every queued job a reservation "
     "in queue order, leaving none to backfill (set order='sjf' to order the queue itself)"),
])
def test_unknown_orders_and_refused_combinations(name: str, options: dict, message: str) -> None:
    with pytest.raises(InputError) as caught:
        policy_from_conf(name, **options)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_the_queue_order_named_as_backfill_order_is_accepted_everywhere() -> None:
    for name in ("fcfs", "conservative", "conservative_classic"):
        assert policy_from_conf(name, order="sjf", backfill_order="sjf").backfill_key is None
