"""The synthetic Lublin–Feitelson generator: determinism, argument checks, and its statistics."""

from __future__ import annotations

import doctest
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from sim.core import InputError, Workload, rigid_job
from sim.workloads import errors as errors_module
from sim.workloads import offered_load, read_swf, synthetic_hpc, write_jobs_csv
from sim.workloads import synthetic as synthetic_module
from tests.conftest import find_trace, needs_trace


def generate(seed: int = 0, **overrides: float) -> Workload:
    arguments = {"jobs": 2000, "nodes": 128, "arrival_rate": 0.002} | overrides
    return synthetic_hpc(np.random.default_rng(seed), **arguments)


def columns(workload: Workload) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Submit times, sizes, run times and time limits as arrays."""
    jobs = workload.jobs
    return (np.array([j.submit for j in jobs]), np.array([j.nodes for j in jobs]),
            np.array([j.runtime for j in jobs]), np.array([j.time_limit for j in jobs]))


def test_same_seed_same_jobs_and_different_seed_different_jobs() -> None:
    assert generate(7).jobs == generate(7).jobs
    assert generate(7).jobs != generate(8).jobs


def test_same_seed_same_jobs_in_another_process(tmp_path: Path) -> None:
    code = ("import sys, numpy as np; from sim.workloads import synthetic_hpc, write_jobs_csv; "
            "write_jobs_csv(synthetic_hpc(np.random.default_rng(7), jobs=2000, nodes=128, arrival_rate=0.002), "
            "sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "other.csv")], check=True,
                   cwd=Path(__file__).resolve().parents[1])
    write_jobs_csv(generate(7), tmp_path / "here.csv")
    assert (tmp_path / "other.csv").read_bytes() == (tmp_path / "here.csv").read_bytes()


def test_jobs_are_well_formed() -> None:
    workload = generate(3, estimate_factor_max=3.0)
    submit, size, runtime, limit = columns(workload)
    assert [job.id for job in workload.jobs] == list(range(2000))
    assert workload.default_nodes == 128 and workload.notes == {}
    assert np.all(np.diff(submit) > 0) and submit[0] > 0
    assert size.min() == 1 and size.max() <= 128 and np.all(size[size > 1] >= 2)
    assert np.all(runtime >= 1) and np.all(runtime <= math.exp(12)) and np.all(runtime == np.floor(runtime))
    assert np.all(limit % 60 == 0) and np.all(limit >= runtime)
    assert np.all(limit <= np.ceil(runtime * 3.0 / 60) * 60)


def test_estimate_factor_one_gives_runtime_rounded_up_to_a_minute() -> None:
    _, _, runtime, limit = columns(generate(estimate_factor_max=1.0))
    assert np.array_equal(limit, np.ceil(runtime / 60) * 60)


@pytest.mark.parametrize(("nodes", "sizes"), [(1, {1}), (2, {1, 2})])
def test_tiny_machines(nodes: int, sizes: set[int]) -> None:
    assert {job.nodes for job in generate(nodes=nodes).jobs} == sizes


def test_sizes_are_capped_on_a_machine_that_is_not_a_power_of_two() -> None:
    workload = generate(nodes=100)
    assert max(job.nodes for job in workload.jobs) == 100
    assert workload.notes["nodes_capped"] == sum(job.nodes == 100 for job in workload.jobs) > 0


@pytest.mark.parametrize(("overrides", "message"), [
    ({"jobs": 0}, "jobs must be a positive integer, got 0"),
    ({"jobs": 2.5}, "jobs must be a positive integer, got 2.5"),
    ({"jobs": True}, "jobs must be a positive integer, got True"),
    ({"nodes": -4}, "nodes must be a positive integer, got -4"),
    ({"arrival_rate": 0.0}, "arrival_rate must be > 0 jobs per second, got 0.0"),
    ({"arrival_rate": math.nan}, "arrival_rate must be a finite number, got nan"),
    ({"arrival_rate": "fast"}, "arrival_rate must be a finite number, got 'fast'"),
    ({"estimate_factor_max": 0.5}, "estimate_factor_max must be ≥ 1"),
    ({"serial_prob": 1.5}, "serial_prob must be a probability in [0, 1], got 1.5"),
    ({"pow2_prob": -0.1}, "pow2_prob must be a probability in [0, 1], got -0.1"),
])
def test_bad_arguments_name_the_parameter(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=f"^synthetic_hpc: {message}".replace("[", r"\[").replace("]", r"\]")):
        generate(**overrides)


def test_rng_must_be_a_generator() -> None:
    with pytest.raises(InputError, match=r"rng must be a numpy\.random\.Generator"):
        synthetic_hpc(42, jobs=1, nodes=1, arrival_rate=1.0)  # type: ignore[arg-type]


def test_realised_arrival_rate_and_size_mix_match_the_parameters() -> None:
    jobs, rate = 20_000, 0.002
    submit, size, _, _ = columns(generate(11, jobs=jobs, arrival_rate=rate))
    assert jobs / submit[-1] == pytest.approx(rate, rel=4 / math.sqrt(jobs))
    serial_sd = math.sqrt(0.244 * 0.756 / jobs)
    assert abs(np.mean(size == 1) - 0.244) < 4 * serial_sd
    parallel = size[size > 1].astype(int)
    assert np.mean(parallel & (parallel - 1) == 0) > synthetic_module.POW2_PROB - 0.02


def expected_runtime(size: np.ndarray) -> np.ndarray:
    """E[e^X | X ≤ 12] for the size-dependent hyper-gamma X, by exponential tilting of each gamma."""
    p = np.clip(synthetic_module.P_SLOPE * size + synthetic_module.P_INTERCEPT, 0, 1)
    cap = synthetic_module.MAX_LOG_RUNTIME
    mass, moment = [], []
    for shape, scale in (synthetic_module.GAMMA_SHORT, synthetic_module.GAMMA_LONG):
        mass.append(stats.gamma.cdf(cap, shape, scale=scale))
        moment.append((1 - scale) ** -shape * stats.gamma.cdf(cap, shape, scale=scale / (1 - scale)))
    return (p * moment[0] + (1 - p) * moment[1]) / (p * mass[0] + (1 - p) * mass[1])


def test_realised_load_matches_the_model() -> None:
    jobs, nodes, rate = 20_000, 128, 0.002
    workload = generate(5, jobs=jobs, nodes=nodes, arrival_rate=rate)
    _, size, runtime, _ = columns(workload)
    implied = rate * np.mean(size * expected_runtime(size)) / nodes
    assert offered_load(workload, nodes) == pytest.approx(implied, rel=0.08)
    assert np.mean(runtime) == pytest.approx(np.mean(expected_runtime(size)), rel=0.05)


@needs_trace("lublin_256.swf")
def test_matches_the_reference_models_own_output() -> None:
    """lublin_256.swf is m_lublin99.c's output for 256 nodes: our simplified model should look alike."""
    reference = columns(read_swf(find_trace("lublin_256.swf")))
    ours = columns(generate(1, jobs=10_000, nodes=256))
    assert np.mean(reference[1] == 1) == pytest.approx(np.mean(ours[1] == 1), abs=0.025)
    assert np.mean(ours[1]) == pytest.approx(np.mean(reference[1]), rel=0.08)
    assert np.mean(np.log(ours[2])) == pytest.approx(np.mean(np.log(reference[2])), abs=0.12)


def test_offered_load() -> None:
    workload = Workload([rigid_job(0, 10, 2, 60, 50), rigid_job(1, 110, 4, 30, 25)])
    assert offered_load(workload, 4) == pytest.approx((2 * 50 + 4 * 25) / (4 * 100))


@pytest.mark.parametrize(("workload", "nodes", "message"), [
    (Workload([rigid_job(0, 0, 1, 1)]), 0, "nodes must be > 0"),
    (Workload([]), 4, "the workload has no jobs"),
    (Workload([rigid_job(0, 5, 1, 1), rigid_job(1, 5, 1, 1)]), 4, "every job is submitted at the same instant"),
])
def test_offered_load_errors(workload: Workload, nodes: int, message: str) -> None:
    with pytest.raises(InputError, match=message):
        offered_load(workload, nodes)


@pytest.mark.parametrize("module", [synthetic_module, errors_module])
def test_docstring_examples(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]
