"""MapReduce workload calibration and the MRCP-RM policy (CP-SAT): deadlines, determinism, validity,
fallback and the missing-ortools message."""

from __future__ import annotations

import statistics
import subprocess
import sys

import numpy as np
import pytest

from sim.core import Cluster, InputError, Job, SimulationResult, Workload
from sim.engine import simulate
from sim.invariants import check_schedule
from sim.policies import policy_from_conf
from sim.policies.mrcp import INSTALL_HINT, MrcpPolicy, cp_model
from sim.workflows.budget import alone_schedule, schedule_length
from sim.workflows.mapreduce import MapReduceShape, mapreduce, mapreduce_stream
from sim.workflows.metrics import completions
from tests.conftest import REPO
from tests.rmdcwf_cases import simulate_workflows, starts, workflow

SMALL = MapReduceShape(maps=(1, 6), reduces=(1, 3), map_time=(1, 20), reduce_time=(5, 30))


def small_stream(seed: int = 0, jobs: int = 12, rate: float = 0.05, m: int = 3) -> Workload:
    return mapreduce_stream(np.random.default_rng(seed), SMALL, jobs=jobs, arrival_rate=rate, s_max=30,
                            em_max=1.5, machines=m, slots=2)


def tasks(workload: Workload) -> list[Job]:
    return [t for wf in workload.workflows for t in wf.tasks]


def run_mrcp(workload: Workload, m: int = 3, **options: object) -> tuple[SimulationResult, MrcpPolicy]:
    policy = policy_from_conf("mrcp", **options)
    assert isinstance(policy, MrcpPolicy)
    result = simulate(tasks(workload), Cluster.slotted(m, 2), policy, workflows=workload.workflows, check=True)
    return result, policy


def late(result: SimulationResult) -> int:
    done = completions(result)
    return sum(done[wf.id] > wf.deadline for wf in result.workflows)


def test_mapreduce_defaults_meet_the_papers_load_and_turnaround_targets() -> None:
    """4,000 draws on m = 50, c_r = 2: mean work within 3 % of 4,000 slot-s (utilisation 0.8 at
    λ = 0.02; the standard error is ~0.6 %) and mean SET^R within 2 % of 383 s (SE ~0.3 %); every
    reduce waits for every map and SET^R is the critical path."""
    rng = np.random.default_rng(11)
    work, length = [], []
    for _ in range(4000):
        dag = mapreduce(rng)
        maps = dag.names.count("map")
        assert all(dag.parents[t] == tuple(range(maps)) for t in range(maps, len(dag.names)))
        work.append(sum(dag.runtimes))
        length.append(schedule_length(alone_schedule(dag.runtimes, dag.parents, 50, 2, 0.0), 0.0))
        assert length[-1] == max(dag.runtimes[:maps]) + max(dag.runtimes[maps:])
    assert statistics.fmean(work) == pytest.approx(4000, rel=0.03)
    assert 0.02 * statistics.fmean(work) / 100 == pytest.approx(0.8, abs=0.025)
    assert statistics.fmean(length) == pytest.approx(383, rel=0.02)


def test_bad_mapreduce_bounds_are_refused_with_the_field() -> None:
    with pytest.raises(InputError, match=r"workload.maps must be \[lo, hi\]"):
        MapReduceShape(maps=(5, 2))


def test_cp_meets_every_deadline_where_greedy_rmdcwf_does_not() -> None:
    """Two jobs arrive at t = 1 on one resource with two slots. RM-DCWF maps job 0 first on both
    slots, so job 1 (deadline 5) misses; its remapping (job 1 then job 0) breaks a sub-deadline of
    job 0, the laxity order is the same attempt (refused), the plan is restored and job 1 is late.
    The CP plan runs job 1's tasks at once and job 0 around them: both on time."""
    wfs = [workflow(0, [(3.0, []), (1.0, []), (6.0, [0])], 15.0, arrival=1.0),
           workflow(1, [(1.0, []), (4.0, [])], 5.0, arrival=1.0)]
    greedy = simulate_workflows(wfs, 1, 2, "rmdcwf")
    assert late(greedy) == 1 and greedy.stats.counters["remap/restores"] == 1
    cp = simulate_workflows(wfs, 1, 2, "mrcp")
    assert late(cp) == 0
    assert {task: start for task, (start, _) in starts(cp).items()} == {0: 1.0, 1: 5.0, 2: 5.0, 100: 4.0, 101: 1.0}


@pytest.mark.parametrize("resources", ["pooled", "alternatives"])
def test_plans_pass_engine_validation_and_the_invariant_checker(resources: str) -> None:
    workload = small_stream()
    result, policy = run_mrcp(workload, resources=resources)
    check_schedule(tasks(workload), result)  # explicitly too (simulate also ran it, check=True)
    records = {r.job.id: r for r in result.records}
    for wf in workload.workflows:
        assert all(records[t.id].start >= wf.earliest_start for t in wf.tasks)
    counters = policy.stats().counters
    assert counters["mrcp/solves"] == len(workload.workflows) and counters["mrcp/fallbacks"] == 0
    per_task = 1 if resources == "pooled" else 3
    assert all(s.intervals >= per_task * s.tasks for s in policy.solves)


def test_deterministic_limit_is_respected_and_reruns_give_the_same_plan() -> None:
    """A tiny deterministic-time limit on a loaded stream: no solve runs past it by more than one
    search step (CP-SAT checks the limit between steps: ~0.2 ms measured), and two runs give
    identical schedules."""
    workload = small_stream(seed=3, jobs=15, rate=0.2)
    limit = 0.005
    first, policy = run_mrcp(workload, max_deterministic_time=limit)
    second, _ = run_mrcp(workload, max_deterministic_time=limit)
    assert max(s.deterministic_time for s in policy.solves) <= limit + 0.001
    assert any(s.status != "OPTIMAL" for s in policy.solves)  # the limit did bind
    assert starts(first) == starts(second)


def test_no_solution_falls_back_to_the_previous_plan_plus_greedy_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    cp = cp_model()
    monkeypatch.setattr(MrcpPolicy, "_run_solver", lambda self, solver, model: (solver.solve(model), cp.UNKNOWN)[1])
    workload = small_stream(jobs=6)
    result, policy = run_mrcp(workload)
    counters = policy.stats().counters
    assert counters["mrcp/fallbacks"] == counters["mrcp/solves"] == 6
    assert len(result.records) == len(tasks(workload))  # every task started, validated by the engine


def test_solve_seconds_are_the_overhead_and_only_unstarted_tasks_enter_the_model() -> None:
    """At each arrival the model holds exactly the tasks of arrived jobs that start at or after
    that instant (the solve precedes the starts due then): no started task, no finished job."""
    workload = small_stream(jobs=12, rate=0.1)
    result, policy = run_mrcp(workload)
    assert set(result.stats.seconds_by_job) == {wf.id for wf in workload.workflows}
    start = {r.job.id: r.start for r in result.records}
    arrived = sorted(workload.workflows, key=lambda wf: (wf.arrival, wf.id))
    expected = [sum(start[t.id] >= wf.arrival for prior in arrived[:k + 1] for t in prior.tasks)
                for k, wf in enumerate(arrived)]
    assert [s.tasks for s in policy.solves] == expected
    assert any(e < sum(len(w.tasks) for w in arrived[:k + 1]) for k, e in enumerate(expected))


def test_mrcp_without_ortools_fails_with_the_install_command() -> None:
    code = ("import sys; sys.modules['ortools'] = None\n"
            "from sim.policies import policy_from_conf\n"
            "try:\n    policy_from_conf('mrcp')\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"InputError {INSTALL_HINT}"
    assert "pip install 'schedlab[mrcp]'" in INSTALL_HINT


def test_the_driver_refuses_mrcp_without_ortools_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from sweeps import task

    for name in [m for m in sys.modules if m == "ortools" or m.startswith("ortools.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ortools", None)
    task._BUILT.clear()
    cfg = {"seed": 0, "cluster": {"_target_": "sweeps.specs.SlottedCluster"},
           "workload": {"_target_": "sweeps.specs.MapReduceStream", "jobs": 10, "warmup": 1},
           "policy": {"_target_": "sim.policies.mrcp.mrcp"}}
    with pytest.raises(InputError, match=r"pip install 'schedlab\[mrcp\]'"):
        task.prepare(cfg)
    task._BUILT.clear()


def test_the_rest_of_schedlab_never_imports_ortools() -> None:
    code = ("import sys\nimport sim.policies, sim.run, sweeps.specs, sweeps.task\n"
            "sim.policies.policy_from_conf('rmdcwf')\nprint(any(m.split('.')[0] == 'ortools' for m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
