"""RM-DCWF placement through the engine: TSP1, TSP2, best-fit resource choice, ties, zero-length
tasks, the FIFO baseline, option validation and what the policy refuses."""

from __future__ import annotations

import pytest

from sim.core import Cluster, InputError, Job, Workload
from sim.engine import simulate
from sim.policies import policy_from_conf
from sim.run import run
from tests.rmdcwf_cases import simulate_workflows, starts, workflow


def test_tsp1_best_fit_prefers_the_resource_it_fills_and_ties_go_to_the_lowest_index() -> None:
    # 2 resources × 2 slots, all at t = 0. Task 0 (10 s): all resources empty → resource 0.
    # Task 100 (5 s): starts at 0 on resource 0 (one slot left, fills it) or 1 (two left) → best fit 0.
    # Task 200 (5 s): resource 0 is full until 5, resource 1 free at 0 → resource 1.
    wfs = [workflow(0, [(10, ())], 100.0), workflow(1, [(5, ())], 100.0), workflow(2, [(5, ())], 100.0)]
    assert starts(simulate_workflows(wfs, 2, 2)) == {0: (0.0, 0), 100: (0.0, 0), 200: (0.0, 1)}


def test_tsp1_waits_for_the_earliest_free_slot() -> None:
    # one slot: 0 runs [0, 10); workflow 1 (s = 2) fits only after it
    wfs = [workflow(0, [(10, ())], 100.0), workflow(1, [(5, ())], 100.0, start=2.0)]
    assert starts(simulate_workflows(wfs, 1, 1)) == {0: (0.0, 0), 100: (10.0, 0)}


def test_tsp2_starts_each_task_as_late_as_its_sub_deadline_allows() -> None:
    # a (2) → b (3), d = 20: SET^R = 5, L = 15, PD shares 6 and 9 → sd_a = 8, sd_b = 20.
    # TSP2: a at 8 − 2 = 6, b at 20 − 3 = 17; the workflow still meets its deadline.
    result = simulate_workflows([workflow(0, [(2, ()), (3, (0,))], 20.0)], 1, 1, tsp="tsp2")
    assert starts(result) == {0: (6.0, 0), 1: (17.0, 0)}
    assert max(r.end for r in result.records) == 20.0


def test_tsp2_best_fit_and_latest_start_across_resources() -> None:
    # 2 × 2 slots. Workflow 0 (one 10 s task, d = 10): its latest start is 0 → resource 0.
    # Workflow 1 (one 4 s task, d = 12): latest start 8 on resource 0 (one slot left) or 1 (two) → 0.
    wfs = [workflow(0, [(10, ())], 10.0), workflow(1, [(4, ())], 12.0)]
    assert starts(simulate_workflows(wfs, 2, 2, tsp="tsp2")) == {0: (0.0, 0), 100: (8.0, 0)}


def test_zero_length_join_takes_no_slot_and_lets_its_child_start_at_once() -> None:
    # a (2) → z (0) → b (3) on one slot: z at 2 without a slot, b at 2
    result = simulate_workflows([workflow(0, [(2, ()), (0, (0,)), (3, (1,))], 30.0)], 1, 1)
    assert starts(result) == {0: (0.0, 0), 1: (2.0, 0), 2: (2.0, 0)}


def test_fifo_maps_in_arrival_order_without_sub_deadlines_or_remapping() -> None:
    # the urgent workflow 1 (d = 30) cannot get ahead of workflow 0 under FIFO: it is late
    wfs = [workflow(0, [(10, ())], 200.0, start=20.0), workflow(1, [(20, ())], 30.0, arrival=5.0)]
    result = simulate_workflows(wfs, 1, 1, "fifo_workflow")
    assert starts(result) == {0: (20.0, 0), 100: (30.0, 0)}
    assert result.stats.task_values == {} and result.stats.counters == {}
    assert set(result.stats.seconds_by_job) == {0, 1}


@pytest.mark.parametrize(("option", "value"), [("laxity_distribution", "xx"), ("laxity", "pd"), ("tsp", "tsp3"),
                                               ("phase_length", "long"), ("remap_trigger", "never")])
def test_a_bad_option_names_the_option_and_the_allowed_values(option: str, value: str) -> None:
    with pytest.raises(InputError, match=rf"{option} '{value}'; expected one of \w+, \w+"):
        policy_from_conf("rmdcwf", **{option: value})


def test_a_bad_remap_cap_is_refused() -> None:
    with pytest.raises(InputError, match="remap_cap"):
        policy_from_conf("rmdcwf", remap_cap=-1)


def test_the_policy_refuses_a_cluster_without_slots_and_a_task_without_workflow() -> None:
    wf = workflow(0, [(1, ())], 10.0)
    with pytest.raises(ValueError, match="slotted cluster"):
        simulate(list(wf.tasks), Cluster(("cpu", "mem"), ((2, 4),)), policy_from_conf("rmdcwf"), workflows=[wf])
    with pytest.raises(ValueError, match="belongs to no workflow"):
        simulate([Job(0, 0.0, (1,), 1.0, 1.0)], Cluster.slotted(1, 1), policy_from_conf("fifo_workflow"))


def test_run_refuses_rmdcwf_on_an_hpc_trace() -> None:
    with pytest.raises(InputError, match="schedules workflow workloads"):
        run(Workload([Job(0, 0.0, (1,), 1.0, 1.0)]), Cluster.nodes(4), policy_from_conf("rmdcwf"))
