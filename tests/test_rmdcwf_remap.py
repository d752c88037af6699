"""Remapping: an urgent arrival moves an earlier job and both meet their deadlines; a failed
remapping restores the plan exactly; late jobs go last; the trigger and cap options."""

from __future__ import annotations

from sim.core import SimulationResult
from sim.workflows.metrics import workflow_table
from sim.workflows.planner import Planner, PlannerConfig
from tests.rmdcwf_cases import simulate_workflows, starts, workflow


def lateness(result: SimulationResult) -> dict[int, bool]:
    table = workflow_table(result)
    return dict(zip(table["job_id"], table["late"], strict=True))


# one slot. Workflow 0 (s = 20, one 10 s task, d = 200) is planned at [20, 30). Workflow 1 arrives
# at 5 (s = 5, one 20 s task, d = 30): the first gap is [5, 20), too short, so TSP1 gives [30, 50) >
# 30 and remapping starts: jobs overlapping [5, 30] = workflow 0; deadline order 1, 0: task 100 at
# [5, 25), then task 0 at [25, 35) — both on time.
URGENT = [workflow(0, [(10, ())], 200.0, start=20.0), workflow(1, [(20, ())], 30.0, arrival=5.0)]


def test_an_urgent_arrival_moves_an_earlier_job_and_both_meet_their_deadlines() -> None:
    result = simulate_workflows(URGENT, 1, 1)
    assert starts(result) == {0: (25.0, 0), 100: (5.0, 0)}
    assert lateness(result) == {0: False, 1: False}
    assert result.stats.counters["remap/attempts"] == 1 and result.stats.counters["remap/successes"] == 1


def test_remap_cap_zero_moves_no_other_job() -> None:
    # only workflow 1 itself may move: the attempt (1,) fails — workflow 1's own check fails again and
    # its nested attempt, the same list, is refused — the plan is restored, the laxity-ordered retry is
    # the same list again (refused), and workflow 1 is mapped anyway at [30, 50): late
    result = simulate_workflows(URGENT, 1, 1, remap_cap=0)
    assert starts(result) == {0: (20.0, 0), 100: (30.0, 0)}
    assert lateness(result) == {0: False, 1: True}
    counters = result.stats.counters
    assert (counters["remap/attempts"], counters["remap/restores"], counters["remap/repeats_refused"]) == (1, 1, 2)


def test_trigger_on_sub_deadline_or_only_on_the_deadline() -> None:
    # one slot: workflow 0 (7 s, d = 100) is planned at [0, 7). Workflow 1: a (2) → b (3), d = 20,
    # sd_a = 2 + 15 · 2/5 = 8. TSP1 puts a at [7, 9): misses sd_a, meets d (b ends at 12).
    wfs = [workflow(0, [(7, ())], 100.0), workflow(1, [(2, ()), (3, (0,))], 20.0)]
    # subdeadline trigger: remap [0, 20] in deadline order 1, 0: a [0,2), b [2,5), then task 0 [5,12)
    sub = simulate_workflows(wfs, 1, 1)
    assert starts(sub) == {0: (5.0, 0), 100: (0.0, 0), 101: (2.0, 0)}
    deadline = simulate_workflows(wfs, 1, 1, remap_trigger="deadline")
    assert starts(deadline) == {0: (0.0, 0), 100: (7.0, 0), 101: (9.0, 0)}
    assert deadline.stats.counters["remap/attempts"] == 0


def test_late_jobs_are_remapped_last_without_a_check() -> None:
    # one slot. Workflow 0 (s = 10, 10 s, d = 15) cannot make it: mapped late at [10, 20).
    # Workflow 1 (s = 0, 15 s, d = 16): TSP1 gives [20, 35), remapping takes workflow 0 along; it is
    # already late, so workflow 1 goes first at [0, 15) and workflow 0 follows at [15, 25).
    wfs = [workflow(0, [(10, ())], 15.0, start=10.0), workflow(1, [(15, ())], 16.0)]
    result = simulate_workflows(wfs, 1, 1)
    assert starts(result) == {0: (15.0, 0), 100: (0.0, 0)}
    assert lateness(result) == {0: True, 1: False}


def test_a_failed_remapping_restores_the_plan_exactly() -> None:
    # one slot. Workflow 0 (s = 50, 10 s, d = 60, laxity 0) at [50, 60); workflow 1 (s = 40, 5 s,
    # d = 100) at [40, 45). Workflow 2 arrives at 1 (s = 40, 15 s, d = 58): TSP1 gives [60, 75).
    # Deadline order 2, 0, 1: task 200 [40, 55), then task 0 [55, 65) misses 60 → nested attempt
    # (2, 0) fails the same way, its retry is refused → restore. Laxity order 0, 2, 1: task 0 [50, 60),
    # task 200 misses 58 → nested (0, 2) fails → restore. Workflow 2 is mapped anyway at [60, 75).
    wfs = [workflow(0, [(10, ())], 60.0, start=50.0), workflow(1, [(5, ())], 100.0, start=40.0),
           workflow(2, [(15, ())], 58.0, arrival=1.0, start=40.0)]
    planner = Planner(1, 1, PlannerConfig())
    for wf in wfs[:2]:
        planner.map_job(wf, 0.0)
    before = planner.calendar.snapshot()
    plans = {i: dict(planner.plans[i].placed) for i in (0, 1)}
    late = planner.map_job(wfs[2], 1.0)
    assert [(p.start, p.end) for p in late.placed.values()] == [(60.0, 75.0)] and late.late
    planner.calendar.remove(200)
    assert planner.calendar.snapshot() == before
    assert {i: planner.plans[i].placed for i in (0, 1)} == plans
    assert list(planner.mapped) == [0, 1, 2]
    counters = planner.counters
    assert counters == {"remap/attempts": 4, "remap/successes": 0, "remap/repeats_refused": 2, "remap/restores": 2}
    result = simulate_workflows(wfs, 1, 1)
    assert starts(result) == {0: (50.0, 0), 100: (40.0, 0), 200: (60.0, 0)}
    assert lateness(result) == {0: False, 1: False, 2: True}


# one slot, all at time 0. X (7 s, d = 7) is planned at [0, 7). A: a0 (2) → a1 (3), d = 20, PD shares
# 6, 9 → sd_a0 = 8: TSP1 gives a0 [7, 9), past 8, and every remap list is (X, A), tried once and then
# refused, so A is force-mapped at a0 [7, 9), a1 [9, 12) — on time for d = 20, but mapJobHelper
# returned false. B (1 s, d = 12.5) then gets [12, 13), past 12.5: the remap takes X, B, A.
FORCED = [workflow(0, [(7, ())], 7.0), workflow(1, [(2, ()), (3, (0,))], 20.0), workflow(2, [(1, ())], 12.5)]


def test_a_job_force_mapped_after_a_failed_remap_is_late_from_then_on() -> None:
    # forced: A is late, so it goes last without a check: X [0,7), B [7,8), then a0 [8,10), a1 [10,13)
    # and everyone meets d_j. planned: A is checked again and a0 misses sd 8 once more; its nested
    # attempt is the list already tried, so B's remap fails and B is force-mapped at [12, 13): late.
    forced = Planner(1, 1, PlannerConfig())
    planned = Planner(1, 1, PlannerConfig(late_rule="planned"))
    for planner in (forced, planned):
        for wf in FORCED[:2]:
            planner.map_job(wf, 0.0)
        a = planner.plans[1]
        assert a.forced and a.completion == 12.0
    assert forced.plans[1].late and not planned.plans[1].late
    b_forced, b_planned = forced.map_job(FORCED[2], 0.0), planned.map_job(FORCED[2], 0.0)
    assert [(p.start, p.end) for p in b_forced.placed.values()] == [(7.0, 8.0)]
    assert [(p.start, p.end) for p in forced.plans[1].placed.values()] == [(8.0, 10.0), (10.0, 13.0)]
    assert [(p.start, p.end) for p in b_planned.placed.values()] == [(12.0, 13.0)]
    assert forced.counters["remap/successes"] == 1 and planned.counters["remap/successes"] == 0
    assert lateness(simulate_workflows(FORCED, 1, 1)) == {0: False, 1: False, 2: False}
    assert lateness(simulate_workflows(FORCED, 1, 1, late_rule="planned")) == {0: False, 1: False, 2: True}
