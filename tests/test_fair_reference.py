"""The heap-based :class:`FairShare` against a literal transcription of the rule — "grant the next
task to the user with the lowest share whose next task fits", by a full scan per grant — on random
traces: the schedules must be identical. The benchmark times the same reference."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from unittest import mock

import hypothesis.strategies as st
from hypothesis import given, settings

from sim.core import Job, Start
from sim.engine import simulate
from sim.fairness.shares import Rule, rule_share
from sim.policies import fair_share, policy_from_conf
from sim.policies.base import EngineView
from sim.policies.fair_share import FairShare, Placement, _MultiResource
from tests.test_fair_invariants import NAMES, scenarios


class NaiveFairShare(_MultiResource):
    """Progressive filling by a full scan of every user per grant (the rule, literally); ``strict``
    stops at the lowest-share user when its next task does not fit."""

    preserves_order = False

    def __init__(self, rule: Rule = "drf", weights: Mapping[str, float] | None = None,
                 resource: str | None = None, placement: Placement = "best_fit", strict: bool = False) -> None:
        super().__init__(placement)
        self.rule, self.weights, self.resource, self.strict = rule, dict(weights or {}), resource, strict
        self._queues: dict[str, deque[Job]] = {}
        self._running: dict[str, list[Job]] = {}

    def attach(self, view: EngineView) -> None:
        super().attach(view)
        self._index = 0 if self.resource is None else view.cluster.resources.index(self.resource)
        self._total = view.cluster.total

    def submit(self, job: Job, now: float) -> None:
        self._queues.setdefault(job.user, deque()).append(job)
        self._running.setdefault(job.user, [])

    def complete(self, job: Job, now: float) -> None:
        self._running[job.user].remove(job)

    def _key(self, user: str) -> float:
        running = self._running[user]
        alloc = [sum(j.demand[r] for j in running) for r in range(len(self._total))]
        return rule_share(alloc, self._total, self.rule, self._index) / self.weights.get(user, 1.0)

    def schedule(self, now: float) -> Sequence[Start]:
        free = self._free()
        starts = []
        while True:
            waiting = [(self._key(u), u) for u, q in self._queues.items() if q]
            fitting = [(k, u) for k, u in waiting if self._place(self._queues[u][0].demand, free) is not None]
            if not fitting or (self.strict and min(waiting) != min(fitting)):
                return starts
            _, user = min(fitting)
            job = self._queues[user].popleft()
            machine = self._place(job.demand, free)
            assert machine is not None
            self._charge(job.demand, free, machine)
            self._running[user].append(job)
            starts.append(Start(job, machine))


VARIANTS = {
    "drf": {"rule": "drf"},
    "drf_weighted": {"rule": "drf", "weights": {"A": 3.0, "B": 0.5}},
    "cpu_fair": {"rule": "single"},
    "asset_fair": {"rule": "asset"},
}


@settings(max_examples=150, deadline=None)
@given(scenarios(), st.sampled_from(sorted(VARIANTS)), st.sampled_from(["best_fit", "first_fit"]), st.booleans())
def test_heap_policy_matches_the_literal_rule(scenario, variant: str, placement: str, strict: bool) -> None:
    cluster, jobs = scenario
    options = {**VARIANTS[variant], "strict": strict}
    fast = simulate(jobs, cluster, FairShare(placement=placement, **options)).records
    slow = simulate(jobs, cluster, NaiveFairShare(placement=placement, **options)).records
    assert [(r.start, r.machine) for r in fast] == [(r.start, r.machine) for r in slow]


@settings(max_examples=60, deadline=None)
@given(scenarios(), st.sampled_from(NAMES), st.sampled_from(["best_fit", "first_fit"]))
def test_numpy_and_python_placement_decide_alike(scenario, name: str, placement: str) -> None:
    cluster, jobs = scenario
    options = {"weights": {"A": 2.0}} if name == "drf_weighted" else {}
    schedules = []
    for threshold in (1, 1000):
        with mock.patch.object(fair_share, "VECTOR_MACHINES", threshold):
            policy = policy_from_conf(name, placement=placement, **options)
            schedules.append([(r.start, r.machine) for r in simulate(jobs, cluster, policy).records])
    assert schedules[0] == schedules[1]
