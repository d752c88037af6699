"""The static allocator on the seed's worked examples, weights, the baselines' failures, bad input."""

from __future__ import annotations

import doctest
from fractions import Fraction as F

import pytest

import sim.fairness.shares
import sim.fairness.static
from sim.core import InputError
from sim.fairness import allocate, rule_share

MODES = ("discrete", "divisible")


@pytest.mark.parametrize("mode", MODES)
def test_seed_canonical_example_9cpu_18gb(mode: str) -> None:
    """Seed: (9 CPU, 18 GB), A (1, 4), B (3, 1) → A 3 tasks, B 2, dominant shares 2/3 each, CPU exhausted."""
    a = allocate((9, 18), {"A": (1, 4), "B": (3, 1)}, mode=mode)
    assert dict(a.tasks) == {"A": 3, "B": 2}
    assert a.dominant_shares == {"A": F(2, 3), "B": F(2, 3)}
    assert a.vector("A") == (3, 12) and a.vector("B") == (6, 2)
    assert a.used == (9, 14)


def test_seed_canonical_example_grant_order() -> None:
    assert allocate((9, 18), {"A": (1, 4), "B": (3, 1)}).grants == ("A", "B", "A", "B", "A")


def test_seed_tiny_example_12cpu_12gb() -> None:
    """Seed: (12, 12), A (3, 1), B (1, 3): one each → 1/4 each; after A, B, A the next grant is B's
    (A 1/2, B 1/4); B's second task levels them at 1/2; filling ends at 3 tasks each (3/4)."""
    a = allocate((12, 12), {"A": (3, 1), "B": (1, 3)})
    assert a.grants[:4] == ("A", "B", "A", "B")
    assert a.grants == ("A", "B", "A", "B", "A", "B")
    assert dict(a.tasks) == {"A": 3, "B": 3}
    assert a.dominant_shares == {"A": F(3, 4), "B": F(3, 4)}
    cap = (F(12), F(12))
    assert rule_share((6, 2), cap) == F(1, 2) and rule_share((1, 3), cap) == F(1, 4)  # after A, B, A
    assert rule_share((2, 6), cap) == F(1, 2)  # after B's second task


def test_weighted_drf_divides_shares_by_weight() -> None:
    a = allocate((12, 12), {"A": (1, 1), "B": (1, 1)}, {"A": 2})
    assert dict(a.tasks) == {"A": 8, "B": 4}
    d = allocate((12, 12), {"A": (1, 1), "B": (1, 1)}, {"A": 2}, mode="divisible")
    assert dict(d.tasks) == {"A": 8, "B": 4}


def test_divisible_mode_allows_fractions_and_saturates_a_resource() -> None:
    a = allocate((10, 10), {"A": (3, 1), "B": (1, 3)}, mode="divisible")
    assert dict(a.tasks) == {"A": F(5, 2), "B": F(5, 2)} and a.used == (10, 10)
    assert allocate((10, 10), {"A": (3, 1), "B": (1, 3)}).tasks == {"A": 2, "B": 2}


def test_asset_fairness_breaks_sharing_incentive() -> None:
    """(30, 30), A (1, 1), B (3, 1): asset fairness gives A 12 tasks; its half of the cluster holds 15."""
    demands = {"A": (1, 1), "B": (3, 1)}
    for mode in MODES:
        asset = allocate((30, 30), demands, rule="asset", mode=mode)
        assert dict(asset.tasks) == {"A": 12, "B": 6}
        assert asset.tasks["A"] < 15  # half the cluster, (15, 15), holds 15 A tasks
        assert allocate((30, 30), demands, mode=mode).tasks["A"] == 15  # DRF keeps the guarantee


def test_cpu_fairness_lets_a_memory_heavy_user_monopolise_memory() -> None:
    """(12, 12), A (1 CPU, 3 GB), B (2, 2): equal CPU shares hand A 3/4 of the memory; B gets 1 task,
    fewer than the 3 its half of the cluster holds. DRF gives A 2, B 3."""
    demands = {"A": (1, 3), "B": (2, 2)}
    cpu = allocate((12, 12), demands, rule="single")
    assert dict(cpu.tasks) == {"A": 3, "B": 1}
    assert cpu.vector("A")[1] / 12 == F(3, 4)
    assert cpu.tasks["B"] < 3
    assert dict(allocate((12, 12), demands).tasks) == {"A": 2, "B": 3}


def test_single_resource_rule_can_name_another_resource() -> None:
    a = allocate((12, 12), {"A": (1, 3), "B": (2, 2)}, rule="single", resource=1)
    assert dict(a.tasks) == {"A": 2, "B": 3}


@pytest.mark.parametrize(
    ("capacity", "demands", "weights", "options", "message"),
    [
        ((9, 0), {"A": (1, 1)}, None, {}, "positive numbers"),
        ((9, 18), {}, None, {}, "no users"),
        ((9, 18), {"A": (1,)}, None, {}, "must be 2 non-negative"),
        ((9, 18), {"A": (0, 0)}, None, {}, "not all zero"),
        ((9, 18), {"A": (-1, 2)}, None, {}, "non-negative"),
        ((9, 18), {"A": (1, 1)}, {"Z": 1}, {}, "unknown users"),
        ((9, 18), {"A": (1, 1)}, {"A": 0}, {}, "weight must be positive"),
        ((9, 18), {"A": (1, 1)}, None, {"rule": "max"}, "unknown fairness rule"),
        ((9, 18), {"A": (1, 1)}, None, {"mode": "fluid"}, "unknown allocation mode"),
        ((9, 18), {"A": (1, 1)}, None, {"rule": "single", "resource": 2}, "resource index"),
        ((9, 18), {"A": (0, 1)}, None, {"rule": "single", "mode": "divisible"}, "positive demand"),
    ],
)
def test_bad_input_is_a_clear_error(capacity, demands, weights, options, message) -> None:
    with pytest.raises(InputError, match=message):
        allocate(capacity, demands, weights, **options)


def test_zero_demand_on_some_resource_is_fine() -> None:
    a = allocate((12, 12), {"A": (1, 0), "B": (0, 2)})
    assert dict(a.tasks) == {"A": 12, "B": 6}


@pytest.mark.parametrize("module", [sim.fairness.shares, sim.fairness.static])
def test_doctests(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]
