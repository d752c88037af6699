"""DRF's four properties on the static allocator, each in the form that holds (see
``sim/fairness/static.py``): exactly in divisible mode, and for whole tasks only the weaker forms —
with the counterexamples that show the exact forms fail.

Arithmetic is exact (Fractions), so every comparison is strict where the theory says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction as F

import hypothesis.strategies as st
from hypothesis import given, settings

from sim.fairness import Allocation, allocate, rule_share

USERS = "ABCD"


@st.composite
def instances(draw, weighted: bool | None = None) -> tuple[tuple[int, ...], dict[str, tuple[int, ...]], dict | None]:
    """Small integer capacities, 2–4 users with non-zero integer demands, optional integer weights."""
    resources = draw(st.integers(1, 3))
    capacity = tuple(draw(st.integers(1, 30)) for _ in range(resources))
    demand = st.tuples(*[st.integers(0, 8)] * resources).filter(any)
    demands = {u: draw(demand) for u in USERS[: draw(st.integers(2, 4))]}
    if weighted is None:
        weighted = draw(st.booleans())
    weights = {u: draw(st.integers(1, 4)) for u in demands} if weighted else None
    return capacity, demands, weights


def runnable(holding: tuple[F, ...], demand: tuple[F, ...]) -> F:
    """How many tasks of ``demand`` fit in ``holding`` (fractionally)."""
    return min(h / d for h, d in zip(holding, demand, strict=True) if d > 0)


def guarantee(a: Allocation, user: str) -> F:
    """Tasks the user could run alone in its weighted slice ``C · w / W`` of the cluster."""
    slice_ = tuple(c * a.weights[user] / sum(a.weights.values()) for c in a.capacity)
    return runnable(slice_, a.demands[user])


def envied(a: Allocation, i: str, j: str, drop: int = 0) -> F:
    """Tasks of i that fit in j's allocation minus ``drop`` tasks, scaled by ``w_i / w_j``."""
    holding = tuple(max(a.tasks[j] - drop, 0) * d * a.weights[i] / a.weights[j] for d in a.demands[j])
    return runnable(holding, a.demands[i])


def true_tasks_when_lying(capacity, demands: Mapping, weights, user: str, lie: tuple[int, ...], mode: str) -> F:
    """Tasks of the user's true demand that fit in what it gets by declaring ``lie``."""
    declared = {**demands, user: lie}
    got = allocate(capacity, declared, weights, mode=mode)
    return runnable(got.vector(user), tuple(F(d) for d in demands[user]))


# ---------------------------------------------------------------------------------- divisible mode


@settings(max_examples=150, deadline=None)
@given(instances())
def test_divisible_sharing_incentive(instance) -> None:
    a = allocate(*instance, mode="divisible")
    total = sum(a.weights.values())
    for u in a.users:
        assert a.dominant_shares[u] >= a.weights[u] / total
        assert a.tasks[u] >= guarantee(a, u)


@settings(max_examples=150, deadline=None)
@given(instances())
def test_divisible_envy_freeness(instance) -> None:
    a = allocate(*instance, mode="divisible")
    for i in a.users:
        for j in a.users:
            if i != j:
                assert envied(a, i, j) <= a.tasks[i]


@settings(max_examples=150, deadline=None)
@given(instances())
def test_divisible_pareto_efficiency(instance) -> None:
    """Every user demands a saturated resource, so nobody can grow without someone shrinking."""
    a = allocate(*instance, mode="divisible")
    full = {r for r, (u, c) in enumerate(zip(a.used, a.capacity, strict=True)) if u == c}
    assert all(u <= c for u, c in zip(a.used, a.capacity, strict=True))
    for user in a.users:
        assert any(a.demands[user][r] > 0 for r in full)


@settings(max_examples=150, deadline=None)
@given(instances(), st.data())
def test_divisible_strategy_proofness(instance, data) -> None:
    capacity, demands, weights = instance
    liar = data.draw(st.sampled_from(sorted(demands)))
    lie = tuple(d + data.draw(st.integers(0, 5)) for d in demands[liar])
    honest = allocate(capacity, demands, weights, mode="divisible").tasks[liar]
    assert true_tasks_when_lying(capacity, demands, weights, liar, lie, "divisible") <= honest


# ----------------------------------------------------------------------------------- discrete mode


@settings(max_examples=200, deadline=None)
@given(instances())
def test_discrete_pareto_efficiency_no_next_task_fits(instance) -> None:
    """Holds exactly: nobody's next whole task fits in what is left."""
    a = allocate(*instance)
    left = tuple(c - u for c, u in zip(a.capacity, a.used, strict=True))
    assert all(x >= 0 for x in left)
    for user in a.users:
        assert any(d > x for d, x in zip(a.demands[user], left, strict=True))


@settings(max_examples=200, deadline=None)
@given(instances())
def test_discrete_sharing_incentive_up_to_one_task_of_every_user(instance) -> None:
    """``d_i ≥ (w_i / W)(1 − Σ_u c_u)``: the guarantee minus one task's dominant share per user."""
    a = allocate(*instance)
    total = sum(a.weights.values())
    slack = sum(rule_share(d, a.capacity) for d in a.demands.values())
    for u in a.users:
        assert a.dominant_shares[u] >= a.weights[u] / total * (1 - slack)


@settings(max_examples=200, deadline=None)
@given(instances())
def test_discrete_envy_free_up_to_one_task_towards_heavier_or_equal_users(instance) -> None:
    a = allocate(*instance)
    for i in a.users:
        for j in a.users:
            if i != j and a.weights[i] <= a.weights[j]:
                assert math.floor(envied(a, i, j, drop=1)) <= a.tasks[i]


def test_discrete_sharing_incentive_counterexample() -> None:
    """(3, 4), A (2, 4), B (1, 2): A's one task takes all the memory; B's half (1.5, 2) holds a task."""
    a = allocate((3, 4), {"A": (2, 4), "B": (1, 2)})
    assert dict(a.tasks) == {"A": 1, "B": 0} and guarantee(a, "B") == 1
    assert allocate((3, 4), {"A": (2, 4), "B": (1, 2)}, mode="divisible").tasks["B"] == 1


def test_discrete_sharing_incentive_can_fail_by_more_than_one_own_task() -> None:
    a = allocate((12, 7), {"A": (3, 3), "B": (4, 4), "C": (2, 1)})
    assert a.tasks["C"] == 0 and math.floor(guarantee(a, "C")) == 2


def test_discrete_envy_freeness_counterexample() -> None:
    a = allocate((3, 4), {"A": (2, 4), "B": (1, 2)})
    assert envied(a, "B", "A") == 2 > a.tasks["B"]  # A's (2, 4) holds two B tasks
    assert envied(a, "B", "A", drop=1) == 0  # but not once one A task is removed (EF1)


def test_discrete_weighted_ef1_fails_towards_a_lighter_user() -> None:
    """One resource of 29; A (7, weight 2) gets 1 task and is blocked, B (2) fills the fragments."""
    a = allocate((29,), {"A": (7,), "B": (2,), "C": (7,), "D": (5,)}, {"A": 2})
    assert dict(a.tasks) == {"A": 1, "B": 5, "C": 1, "D": 1}
    assert math.floor(envied(a, "A", "B", drop=1)) == 2 > a.tasks["A"]


def test_discrete_strategy_proofness_counterexample() -> None:
    """(10, 10), A (3, 4), B (2, 1): B declaring (2, 2) blocks A's second task and gains one task."""
    demands = {"A": (3, 4), "B": (2, 1)}
    assert allocate((10, 10), demands).tasks["B"] == 2
    assert allocate((10, 10), {**demands, "B": (2, 2)}).tasks["B"] == 3
    assert true_tasks_when_lying((10, 10), demands, None, "B", (2, 2), "discrete") == 3
    # Divisible DRF gives the liar less than the truth.
    assert true_tasks_when_lying((10, 10), demands, None, "B", (2, 2), "divisible") <= \
        allocate((10, 10), demands, mode="divisible").tasks["B"]


def test_discrete_strategy_proofness_fails_by_two_tasks() -> None:
    """(8, 7), A (0, 1), B (3, 2): A padding its CPU to (1, 1) blocks B and gets 5 tasks, not 3."""
    demands = {"A": (0, 1), "B": (3, 2)}
    assert allocate((8, 7), demands).tasks["A"] == 3
    lied = allocate((8, 7), {**demands, "A": (1, 1)})
    assert dict(lied.tasks) == {"A": 5, "B": 1}
