"""Deadline budgeting (DBW) on hand-built DAGs: SET^R, laxity, phases, PD / ED shares and
sub-deadlines with the multi-parent rule. Expected values are worked out by hand in the comments."""

from __future__ import annotations

import pytest

from sim.core import SimulationResult
from sim.workflows.budget import alone_schedule, laxity, mapping_order, phase_laxities, sub_deadlines
from sim.workflows.dag import levels, topological_order
from tests.rmdcwf_cases import simulate_workflows, workflow

# Fork-join: 0 (4) → {1 (2), 2 (3)} → 3 (1)
FORK_RT = [4.0, 2.0, 3.0, 1.0]
FORK_PARENTS = [[], [0], [0], [1, 2]]


def budget(deadline: float, runtimes: list[float], parents: list[list[int]], m: int, c: int, start: float,
           distribution: str = "pd", phase_length: str = "span") -> tuple[list[float], float, list[float]]:
    finish = alone_schedule(runtimes, parents, m, c, start)
    lax = laxity(deadline, start, max(finish) - start)
    phase = levels(parents)
    shares = phase_laxities(lax, phase, runtimes, finish, start, distribution, phase_length)
    return finish, lax, sub_deadlines(deadline, phase, runtimes, parents, finish, shares, topological_order(parents))


def test_alone_schedule_on_two_single_slot_resources() -> None:
    # order 0, 2, 1, 3. 0 → r0 [10,14). 2: est 14, r0 and r1 both free with one slot → r0 [14,17).
    # 1: est 14, r0 busy until 17, r1 free → r1 [14,16). 3: est max(16,17) = 17 → r0 [17,18).
    assert alone_schedule(FORK_RT, FORK_PARENTS, 2, 1, 10.0) == [14.0, 16.0, 17.0, 18.0]
    # one slot: everything in sequence 0, 2, 1, 3
    assert alone_schedule(FORK_RT, FORK_PARENTS, 1, 1, 10.0) == [14.0, 19.0, 17.0, 20.0]
    # plenty of room: the critical path 4 + 3 + 1
    assert max(alone_schedule(FORK_RT, FORK_PARENTS, 50, 2, 0.0)) == 8.0


def test_the_sweep_places_a_task_whose_parents_were_placed_earlier_in_the_same_sweep() -> None:
    # order 2 (5), 0, 1, 3: 2 waits; 0 → r0 [0,2); 1 → r1 [0,2); 3 (parents now placed) → r0 [2,3);
    # second sweep: 2 → r1 [2,7) (r0 is busy until 3)
    assert alone_schedule([2.0, 2.0, 5.0, 1.0], [[], [], [0, 1], [0, 1]], 2, 1, 0.0) == [2.0, 2.0, 7.0, 3.0]


def test_mapping_order_breaks_ties_by_sub_deadline_then_index() -> None:
    assert mapping_order([3.0, 3.0, 3.0, 5.0], [9.0, 4.0, 4.0, 1.0]) == [3, 1, 2, 0]


def test_pd_span_sub_deadlines_and_the_multi_parent_rule() -> None:
    # SET^R = 18 − 10 = 8, L = 30 − 10 − 8 = 12; phases 1, 2, 2, 3 end at 14, 17, 18 → ET 4, 3, 1;
    # shares 6, 4.5, 1.5, cumulative 6, 10.5, 12. sd0 = 14 + 6 = 20, sd1 = 16 + 10.5, sd2 = 17 + 10.5,
    # sd3 = d = 30; task 3 has two parents: v = 30 − 1 = 29 raises sd1 and sd2 to 29.
    finish, lax, sd = budget(30.0, FORK_RT, FORK_PARENTS, 2, 1, 10.0)
    assert lax == 12.0
    assert levels(FORK_PARENTS) == [1, 2, 2, 3]
    assert phase_laxities(lax, [1, 2, 2, 3], FORK_RT, finish, 10.0) == [6.0, 4.5, 1.5]
    assert sd == [20.0, 29.0, 29.0, 30.0]


def test_ed_sub_deadlines() -> None:
    # shares 4 each, cumulative 4, 8, 12: sd0 = 18, sd1 = 24 → 29, sd2 = 25 → 29, sd3 = 30
    assert budget(30.0, FORK_RT, FORK_PARENTS, 2, 1, 10.0, "ed")[2] == [18.0, 29.0, 29.0, 30.0]


def test_phase_length_option_largest_task() -> None:
    # one slot: completions 14, 19, 17, 20; SET^R = 10, L = 10. span: ET 4, 5, 1 → shares 4, 5, 1 →
    # sd0 = 18. max_task: ET 4, 3, 1 → shares 5, 3.75, 1.25 → sd0 = 19. The joins get 30 − 1 = 29.
    assert budget(30.0, FORK_RT, FORK_PARENTS, 1, 1, 10.0)[2] == [18.0, 29.0, 29.0, 30.0]
    assert budget(30.0, FORK_RT, FORK_PARENTS, 1, 1, 10.0, phase_length="max_task")[2] == [19.0, 29.0, 29.0, 30.0]


def test_multi_parent_rule_takes_the_tightest_child() -> None:
    # two joins of 0 and 1: task 2 (5) and task 3 (1), both in the last phase (sd = 17); SET^R = 7,
    # L = 10, ED shares 5, 5: sd0 = sd1 = 2 + 5 = 7, raised to min(17 − 5, 17 − 1) = 12 (not 16)
    assert budget(17.0, [2.0, 2.0, 5.0, 1.0], [[], [], [0, 1], [0, 1]], 2, 1, 0.0, "ed")[2] == [12.0, 12.0, 17.0, 17.0]


def test_negative_laxity_is_kept_signed_and_the_rule_only_raises() -> None:
    # d = 14 < s + SET^R = 18: L = −4; PD shares −2, −1.5, −0.5 → cumulative −2, −3.5, −4.
    # sd0 = 12, sd1 = 16 − 3.5 = 12.5 → raised to 14 − 1 = 13, sd2 = 17 − 3.5 = 13.5 stays, sd3 = 14.
    _, lax, sd = budget(14.0, FORK_RT, FORK_PARENTS, 2, 1, 10.0)
    assert lax == -4.0
    assert sd == [12.0, 13.0, 13.5, 14.0]


def sub_deadline_of(result: SimulationResult, task_id: int) -> float:
    return result.stats.task_values["sub_deadline"][task_id]


@pytest.mark.parametrize(("kind", "sd_a"), [("sl", 16.0), ("tl", 32.0)])
def test_sample_and_true_laxity_through_the_policy(kind: str, sd_a: float) -> None:
    # one slot; workflow 0 (a 10 s task) is planned first at [0, 10). Workflow 1: a (2) → b (3), d = 40.
    # SL: alone a [0,2), b [2,5): L = 35, ET 2, 3 → shares 14, 21 → sd_a = 2 + 14 = 16.
    # TL: on the live plan a [10,12), b [12,15): L = 40 − 15 = 25, ET 12, 3 → shares 20, 5 → sd_a = 32.
    wfs = [workflow(0, [(10, ())], 100.0), workflow(1, [(2, ()), (3, (0,))], 40.0)]
    result = simulate_workflows(wfs, 1, 1, laxity=kind)
    assert sub_deadline_of(result, 100) == sd_a
    assert sub_deadline_of(result, 101) == 40.0
    assert {r.job.id: r.start for r in result.records} == {0: 0.0, 100: 10.0, 101: 12.0}
