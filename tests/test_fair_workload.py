"""Multi-resource workloads: the synthetic generator and the CSV format (with its clear errors)."""

from __future__ import annotations

import doctest
import gzip
from pathlib import Path

import numpy as np
import pytest

import sim.workloads.multires as multires
from sim.core import Cluster, InputError, Workload
from sim.engine import simulate
from sim.policies import policy_from_conf
from sim.workloads.multires import (
    UserSpec,
    multires_cluster,
    multires_workload,
    parse_multires_csv,
    read_multires_csv,
    write_multires_csv,
)
from tests.test_fair_invariants import NAMES

USERS = {
    "A": {"demand": {"cpu": 1, "mem": 4}, "tasks": 50, "duration": 30.0, "rate": 0.5, "weight": 2.0},
    "B": {"demand": (3, 1), "tasks": 40, "duration": 20.0, "rate": 0.2, "spread": 0.5, "quantum": 0.5},
}
CLUSTER = multires_cluster({"cpu": 9, "mem": 18})


def generate(seed: int = 1, users=USERS, **options) -> multires.MultiResWorkload:
    return multires_workload(np.random.default_rng(seed), users=users, cluster=CLUSTER, **options)


def test_generator_shape_and_weights() -> None:
    w = generate()
    assert isinstance(w, Workload) and w.resources == ("cpu", "mem") and w.weights == {"A": 2.0, "B": 1.0}
    assert len(w.jobs) == 90 and [j.id for j in w.jobs] == list(range(90))
    assert [j.submit for j in w.jobs] == sorted(j.submit for j in w.jobs)
    a = [j for j in w.jobs if j.user == "A"]
    assert all(j.demand == (1.0, 4.0) and j.runtime == j.time_limit > 0 for j in a)
    b = [j for j in w.jobs if j.user == "B"]
    assert all(1.5 <= j.demand[0] <= 4.5 and j.demand[0] % 0.5 == 0 and 0.5 <= j.demand[1] <= 1.5 for j in b)
    # Poisson arrivals: mean gap ≈ 1 / rate (loose bound on 50 draws).
    assert 1.0 < np.diff([0.0] + [j.submit for j in a]).mean() < 3.5


def test_generator_is_deterministic_and_users_draw_independently() -> None:
    assert generate(7).jobs == generate(7).jobs
    assert generate(7).jobs != generate(8).jobs
    changed = {**USERS, "B": {**USERS["B"], "tasks": 5, "rate": 3.0}}
    a_of = lambda w: [(j.submit, j.demand, j.runtime) for j in w.jobs if j.user == "A"]  # noqa: E731
    assert a_of(generate(7)) == a_of(generate(7, users=changed))


def test_generator_all_at_start_and_fixed_durations() -> None:
    w = generate(users={"A": UserSpec(demand=(1, 1), tasks=3, duration=5, start=2.0, duration_dist="fixed")})
    assert [(j.submit, j.runtime) for j in w.jobs] == [(2.0, 5.0)] * 3


@pytest.mark.parametrize(
    ("users", "message"),
    [
        ({}, "no users"),
        ({"A": {"demand": (1, 1), "tasks": 0, "duration": 1}}, "tasks must be a positive integer"),
        ({"A": {"demand": (1, 1), "tasks": 2, "duration": 0}}, "duration must be a number > 0"),
        ({"A": {"demand": (1,), "tasks": 2, "duration": 1}}, "must be 2 non-negative"),
        ({"A": {"demand": (0, 0), "tasks": 2, "duration": 1}}, "not all zero"),
        ({"A": {"demand": {"cpu": 1}, "tasks": 2, "duration": 1}}, "expected exactly"),
        ({"A": {"demand": (1, 1), "tasks": 2, "duration": 1, "rate": -1}}, "rate must be"),
        ({"A": {"demand": (1, 1), "tasks": 2, "duration": 1, "weight": 0}}, "weight must be"),
        ({"A": {"demand": (1, 1), "tasks": 2, "duration": 1, "spread": 1.5}}, "spread must be"),
        ({"A": {"demand": (1, 1), "tasks": 2, "duration": 1, "colour": 1}}, "unknown field 'colour'"),
        ({"A": {"demand": (1, 1), "duration": 1}}, "user 'A'"),
        ({"A": {"demand": (10, 1), "tasks": 2, "duration": 1}}, r"task 0 \(user 'A'\): demand cpu=10, mem=1 exceeds"),
    ],
)
def test_generator_errors(users, message: str) -> None:
    with pytest.raises(InputError, match=message):
        generate(users=users)


def test_cluster_helper_and_resources_argument() -> None:
    assert multires_cluster({"cpu": 4, "mem": 8}, machines=2).machines == ((4, 8), (4, 8))
    with pytest.raises(InputError, match="machines"):
        multires_cluster({"cpu": 4}, machines=0)
    with pytest.raises(InputError, match="differ"):
        generate(resources=("mem", "cpu"))
    w = multires_workload(np.random.default_rng(0), users={"A": {"demand": (1,), "tasks": 1, "duration": 1}},
                          resources=("gpu",))
    assert w.resources == ("gpu",)


def test_csv_reads_header_named_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("mem, user ,submit_time,duration,cpu\n4,A,0,10,1\n\n1,B,2.5,5,3\n")
    w = read_multires_csv(path, cluster=CLUSTER, weights={"A": 2})
    assert w.resources == ("cpu", "mem") and w.weights == {"A": 2.0, "B": 1.0}
    assert [(j.id, j.user, j.submit, j.demand, j.runtime) for j in w.jobs] == [
        (0, "A", 0.0, (1.0, 4.0), 10.0), (1, "B", 2.5, (3.0, 1.0), 5.0)]
    gz = tmp_path / "t.csv.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert read_multires_csv(gz, cluster=CLUSTER).jobs == w.jobs
    # Without a cluster the resource columns are every other column, in header order.
    assert read_multires_csv(path).resources == ("mem", "cpu")


def test_csv_round_trip_of_generated_workload(tmp_path: Path) -> None:
    w = generate(3)
    write_multires_csv(w, tmp_path / "w.csv")
    back = read_multires_csv(tmp_path / "w.csv", cluster=CLUSTER, weights=w.weights)
    assert back.jobs == w.jobs and back.weights == w.weights


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("user,submit_time,cpu,mem\n", "missing column 'duration'"),
        ("user,submit_time,duration\nA,0,1\n", "no resource columns"),
        ("user,submit_time,duration,cpu,mem\n", "no tasks"),
        ("user,submit_time,duration,cpu,mem,cpu\nA,0,1,1,1,1\n", "duplicate column"),
        ("user,submit_time,duration,cpu,mem\nA,0,1,1\n", r"t.csv:2: expected 5 comma-separated cells"),
        ("user,submit_time,duration,cpu,mem\nA,soon,1,1,1\n", r"t.csv:2: column 'submit_time': expected a number"),
        ("user,submit_time,duration,cpu,mem\nA,0,1,1,1\nA,0,-3,1,1\n", r"t.csv:3: column 'duration'"),
        ("user,submit_time,duration,cpu,mem\nA,0,0,1,1\n", r"column 'duration': expected a number > 0"),
        ("user,submit_time,duration,cpu,mem\nA,0,1,nan,1\n", r"column 'cpu': expected a number"),
        ("user,submit_time,duration,cpu,mem\n,0,1,1,1\n", "column 'user': expected a user name"),
        ("user,submit_time,duration,cpu,mem\nA,0,1,0,0\n", r"task 0 \(user 'A'\): demand is zero"),
    ],
)
def test_csv_bad_rows_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_multires_csv(text, "t.csv")


def test_csv_checks_against_the_cluster() -> None:
    good = "user,submit_time,duration,cpu,mem\nA,0,1,1,1\n"
    with pytest.raises(InputError, match=r"t.csv:3: task 1 \(user 'B'\): demand cpu=10, mem=1 exceeds every machine"):
        parse_multires_csv(good + "B,0,1,10,1\n", "t.csv", cluster=CLUSTER)
    with pytest.raises(InputError, match="missing resource column 'gpu'"):
        parse_multires_csv(good, "t.csv", resources=("cpu", "mem", "gpu"))
    with pytest.raises(InputError, match="unknown column 'mem'"):
        parse_multires_csv(good, "t.csv", resources=("cpu",))
    with pytest.raises(InputError, match="weights for users not in the file: Z"):
        parse_multires_csv(good, "t.csv", weights={"Z": 1.0})
    with pytest.raises(InputError, match="weight must be"):
        parse_multires_csv(good, "t.csv", weights={"A": -1.0})
    split = Cluster(("cpu", "mem"), ((2, 2), (2, 2)))  # 4 CPUs in total, but a task needs one machine
    with pytest.raises(InputError, match="task 0"):
        parse_multires_csv("user,submit_time,duration,cpu,mem\nA,0,1,3,1\n", "t.csv", cluster=split)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_multires_csv(tmp_path / "nope.csv")


def test_generated_workload_runs_under_every_policy() -> None:
    w = generate(5)
    for name in NAMES:
        options = {"weights": w.weights} if name == "drf_weighted" else {}
        assert len(simulate(w.jobs, CLUSTER, policy_from_conf(name, **options)).records) == len(w.jobs)


def test_doctests() -> None:
    assert doctest.testmod(multires).failed == 0
