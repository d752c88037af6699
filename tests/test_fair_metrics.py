"""Fairness metrics on a hand-built schedule with values worked out by hand."""

from __future__ import annotations

import doctest

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

import sim.fairness.metrics
from sim.core import Cluster, Job, JobRecord, SimulationResult
from sim.engine import simulate
from sim.fairness import dominant_share_timeline, fairness_summary, jain_index
from sim.metrics import summarize
from sim.policies import policy_from_conf
from sim.workloads.multires import multires_cluster, multires_workload
from tests.test_fair_invariants import NAMES, scenarios

CLUSTER = Cluster(("cpu", "mem"), ((10, 10),))


def record(job_id: int, user: str, demand: tuple[float, float], submit: float, start: float, end: float) -> JobRecord:
    return JobRecord(Job(job_id, submit, demand, end - start, end - start, user), start, end)


# A (2, 4) on [0, 10) then A (1, 2) on [10, 20) (submitted at 5); B (5, 1) on [0, 20) then B (2, 2)
# on [20, 30) (submitted at 0). Both are backlogged only during [5, 10), with shares 0.4 and 0.5.
RESULT = SimulationResult(
    [record(0, "A", (2, 4), 0, 0, 10), record(1, "B", (5, 1), 0, 0, 20), record(2, "A", (1, 2), 5, 10, 20),
     record(3, "B", (2, 2), 0, 20, 30)],
    CLUSTER, "hand", 0)


def test_timeline_is_a_step_function_per_user() -> None:
    assert dominant_share_timeline(RESULT) == {
        "time": [0, 0, 10, 20, 20, 30],
        "user": ["A", "B", "A", "A", "B", "B"],
        "dominant_share": [0.4, 0.5, 0.2, 0.0, 0.2, 0.0],
    }


def test_summary_values() -> None:
    s = fairness_summary(RESULT)
    assert s["share/A/mean"] == pytest.approx(0.2) and s["share/B/mean"] == pytest.approx(0.4)
    assert s["fairness/jain"] == pytest.approx(0.81 / 0.82)
    assert s["fairness/jain_mean"] == pytest.approx(0.36 / 0.4)
    assert s["wait/A/mean"] == 2.5 and s["wait/B/mean"] == 10.0
    assert all(isinstance(v, float) for v in s.values())
    overall = summarize(RESULT)  # utilisation and overall waits have one definition, sim.metrics
    assert overall["util/cpu"] == pytest.approx(0.5) and overall["util/mem"] == pytest.approx(1 / 3)
    assert overall["wait/mean"] == 6.25
    assert not {"util/cpu", "wait/mean", "wait/p95"} & set(s)


def test_weights_normalise_shares_in_jain() -> None:
    s = fairness_summary(RESULT, {"B": 2.0})
    assert s["fairness/jain"] == pytest.approx(0.65**2 / (2 * (0.16 + 0.0625)))
    assert s["fairness/jain_mean"] == pytest.approx(1.0)
    assert s["share/B/mean"] == pytest.approx(0.4)  # shares themselves stay unweighted


def test_jain_counts_only_instants_with_two_backlogged_users() -> None:
    lone = SimulationResult([record(0, "A", (5, 5), 0, 0, 10), record(1, "B", (1, 1), 0, 0, 30)], CLUSTER, "x", 0)
    s = fairness_summary(lone)
    assert s["fairness/jain"] == 1.0
    assert s["fairness/jain_mean"] == pytest.approx(jain_index([0.5 / 3, 0.1]))


def test_jain_index_limits() -> None:
    assert jain_index([0.2] * 5) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_drf_is_fairer_than_fcfs_on_a_backlogged_workload() -> None:
    """Two users with opposite task shapes and a standing backlog: DRF equalises dominant shares."""
    cluster = multires_cluster({"cpu": 9, "mem": 18})
    users = {"A": {"demand": (1, 4), "tasks": 60, "duration": 10.0, "rate": 2.0},
             "B": {"demand": (3, 1), "tasks": 60, "duration": 10.0, "rate": 2.0}}
    w = multires_workload(np.random.default_rng(0), users=users, cluster=cluster)
    jain = {name: fairness_summary(simulate(w.jobs, cluster, policy_from_conf(name)))["fairness/jain"]
            for name in ("drf", "fcfs_multi", "cpu_fair")}
    assert jain["drf"] > 0.97 and jain["drf"] > jain["fcfs_multi"] + 0.05 and jain["drf"] > jain["cpu_fair"] + 0.05


def test_timeline_of_a_simulation_matches_its_records() -> None:
    jobs = [Job(i, 0.0, (1, 4), 10, 10, "A") for i in range(5)]
    jobs += [Job(5 + i, 0.0, (3, 1), 10, 10, "B") for i in range(5)]
    result = simulate(jobs, multires_cluster({"cpu": 9, "mem": 18}), policy_from_conf("drf"))
    t = dominant_share_timeline(result)
    rows = list(zip(t["time"], t["user"], t["dominant_share"], strict=True))
    assert rows[:2] == [(0.0, "A", pytest.approx(2 / 3)), (0.0, "B", pytest.approx(2 / 3))]
    assert fairness_summary(result)["share/A/mean"] == pytest.approx((2 / 3 * 10 + 4 / 9 * 10) / 30)


def test_empty_result() -> None:
    empty = SimulationResult([], CLUSTER, "x", 0)
    assert fairness_summary(empty) == {}
    assert dominant_share_timeline(empty) == {"time": [], "user": [], "dominant_share": []}


def test_doctests() -> None:
    assert doctest.testmod(sim.fairness.metrics).failed == 0


@settings(max_examples=60, deadline=None)
@given(scenarios(), st.sampled_from(NAMES))
def test_timeline_and_summary_agree_with_the_records(scenario, name: str) -> None:
    cluster, jobs = scenario
    result = simulate(jobs, cluster, policy_from_conf(name))
    timeline = dominant_share_timeline(result)
    totals = cluster.total
    for t, user, share in zip(timeline["time"], timeline["user"], timeline["dominant_share"], strict=True):
        held = [sum(r.job.demand[k] for r in result.records if r.job.user == user and r.start <= t < r.end)
                for k in range(len(totals))]
        assert share == pytest.approx(max(h / c for h, c in zip(held, totals, strict=True)))
    summary = fairness_summary(result, {"A": 2.0})
    users = sorted({j.user for j in jobs})
    assert 1 / len(users) - 1e-9 <= summary["fairness/jain"] <= 1 + 1e-9
    timed = max(r.end for r in result.records) > min(j.submit for j in jobs)  # else every mean over time is NaN
    assert all(0 <= summary[f"share/{u}/mean"] <= 1 + 1e-9 if timed else np.isnan(summary[f"share/{u}/mean"])
               for u in users)
    util = summarize(result)
    assert all(0 <= v <= 1 + 1e-9 if timed else np.isnan(v) for k, v in util.items()
               if k == "util" or k.startswith("util/"))
