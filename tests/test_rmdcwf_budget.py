"""Deadline budgeting (DBW) on hand-built DAGs: SET^R, laxity, phases, PD / ED shares and
sub-deadlines with the multi-parent rule. Expected values are worked out by hand in the comments."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.core import SimulationResult
from sim.workflows.budget import MultiParent, alone_schedule, laxity, mapping_order, phase_laxities, sub_deadlines
from sim.workflows.dag import levels, topological_order
from tests.rmdcwf_cases import simulate_workflows, workflow

# Fork-join: 0 (4) → {1 (2), 2 (3)} → 3 (1)
FORK_RT = [4.0, 2.0, 3.0, 1.0]
FORK_PARENTS = [[], [0], [0], [1, 2]]


def budget(deadline: float, runtimes: list[float], parents: list[list[int]], m: int, c: int, start: float,
           distribution: str = "pd", phase_length: str = "span",
           multi_parent: MultiParent = "align") -> tuple[list[float], float, list[float]]:
    finish = alone_schedule(runtimes, parents, m, c, start)
    lax = laxity(deadline, start, max(finish) - start)
    phase = levels(parents)
    shares = phase_laxities(lax, phase, runtimes, finish, start, distribution, phase_length)
    return finish, lax, sub_deadlines(deadline, phase, runtimes, parents, finish, shares, topological_order(parents),
                                      multi_parent)


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


def test_pd_span_sub_deadlines_and_the_multi_parent_rules() -> None:
    # SET^R = 18 − 10 = 8, L = 30 − 10 − 8 = 12; phases 1, 2, 2, 3 end at 14, 17, 18 → ET 4, 3, 1;
    # shares 6, 4.5, 1.5, cumulative 6, 10.5, 12. Eq. 2: sd0 = 14 + 6 = 20, sd1 = 16 + 10.5 = 26.5,
    # sd2 = 17 + 10.5 = 27.5, sd3 = d = 30. Task 3 joins 1 and 2:
    # align: target 27.5 (the co-parents' largest), cap 30 − 1 = 29 → sd1 = sd2 = 27.5;
    # latest_start: 30 − 1 = 29 for both; none: Eq. 2 as is.
    finish, lax, sd = budget(30.0, FORK_RT, FORK_PARENTS, 2, 1, 10.0)
    assert lax == 12.0
    assert levels(FORK_PARENTS) == [1, 2, 2, 3]
    assert phase_laxities(lax, [1, 2, 2, 3], FORK_RT, finish, 10.0) == [6.0, 4.5, 1.5]
    assert sd == [20.0, 27.5, 27.5, 30.0]
    assert budget(30.0, FORK_RT, FORK_PARENTS, 2, 1, 10.0, multi_parent="latest_start")[2] == [20.0, 29.0, 29.0, 30.0]
    assert budget(30.0, FORK_RT, FORK_PARENTS, 2, 1, 10.0, multi_parent="none")[2] == [20.0, 26.5, 27.5, 30.0]


def test_ed_sub_deadlines() -> None:
    # shares 4 each, cumulative 4, 8, 12: sd0 = 18, sd1 = 24, sd2 = 25, sd3 = 30; align lifts sd1 to its
    # co-parent's 25 (cap 29); latest_start lifts both to 29
    assert budget(30.0, FORK_RT, FORK_PARENTS, 2, 1, 10.0, "ed")[2] == [18.0, 25.0, 25.0, 30.0]
    assert budget(30.0, FORK_RT, FORK_PARENTS, 2, 1, 10.0, "ed", multi_parent="latest_start")[2] == [
        18.0, 29.0, 29.0, 30.0]


def test_phase_length_option_largest_task() -> None:
    # one slot: completions 14, 19, 17, 20; SET^R = 10, L = 10. span: ET 4, 5, 1 → shares 4, 5, 1 →
    # cumulative 4, 9, 10 → sd0 = 18, sd1 = 28, sd2 = 26 → aligned to 28 (cap 29).
    # max_task: ET 4, 3, 1 → shares 5, 3.75, 1.25 → cumulative 5, 8.75, 10 → sd0 = 19, sd1 = 27.75,
    # sd2 = 25.75 → aligned to 27.75.
    assert budget(30.0, FORK_RT, FORK_PARENTS, 1, 1, 10.0)[2] == [18.0, 28.0, 28.0, 30.0]
    assert budget(30.0, FORK_RT, FORK_PARENTS, 1, 1, 10.0, phase_length="max_task")[2] == [19.0, 27.75, 27.75, 30.0]


def test_multi_parent_rules_when_the_co_parents_already_agree() -> None:
    # two joins of 0 and 1: task 2 (5) and task 3 (1), both in the last phase (sd = 17); SET^R = 7,
    # L = 10, ED shares 5, 5: sd0 = sd1 = 2 + 5 = 7. align: the co-parents agree (target 7), nothing
    # moves; latest_start: raised to the tightest join's latest start min(17 − 5, 17 − 1) = 12.
    dag = ([2.0, 2.0, 5.0, 1.0], [[], [], [0, 1], [0, 1]])
    assert budget(17.0, *dag, 2, 1, 0.0, "ed")[2] == [7.0, 7.0, 17.0, 17.0]
    assert budget(17.0, *dag, 2, 1, 0.0, "ed", multi_parent="latest_start")[2] == [12.0, 12.0, 17.0, 17.0]


# CyberShake's shape in small: 0 (10) has a single-parent child 1 (5) and, with 2 (20), a join 3 (1);
# 4 (1) joins 1 and 3 in the last phase. ĉ = 10, 15, 20, 21, 22; shares 4, 4, 4 (cumulative 4, 8, 12);
# d = 40: Eq. 2 gives sd0 = 14, 23, 24, 29, 40.
CYBER = dict(deadline=40.0, phase=[1, 2, 1, 2, 3], runtimes=[10.0, 5.0, 20.0, 1.0, 1.0],
             parents=[[], [0], [], [0, 2], [1, 3]], finish=[10.0, 15.0, 20.0, 21.0, 22.0], shares=[4.0, 4.0, 4.0],
             order=[0, 1, 2, 3, 4])


def test_align_never_takes_a_single_parent_child_its_sub_deadline() -> None:
    # align: 0 → target max(14, 24) = 24, cap min(23 − 5, 29 − 1) = 18 (its child 1 must still fit): 18;
    # 2 → target 24, cap 28: 24; 1 and 3 (co-parents of 4) → target max(23, 29) = 29, cap 39: 29.
    assert sub_deadlines(**CYBER) == [18.0, 29.0, 24.0, 29.0, 40.0]
    # latest_start cascades from the children: 3 → 40 − 1 = 39, 2 → 39 − 1 = 38, 1 → 39, 0 → 38, and
    # task 1 (5 s) can then not start before 38 nor end by its 39: an impossible sub-deadline
    latest = sub_deadlines(**CYBER, multi_parent="latest_start")
    assert latest == [38.0, 39.0, 38.0, 39.0, 40.0]
    assert latest[0] + 5.0 > latest[1]
    assert sub_deadlines(**CYBER, multi_parent="none") == [14.0, 23.0, 24.0, 29.0, 40.0]


def test_sub_deadlines_refuse_an_unknown_multi_parent_rule() -> None:
    with pytest.raises(ValueError, match="multi_parent"):
        sub_deadlines(**CYBER, multi_parent="cascade")  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_align_is_order_free_only_raises_and_keeps_every_child_feasible(data: st.DataObject) -> None:
    n = data.draw(st.integers(2, 12))
    parents = [sorted(data.draw(st.sets(st.integers(0, t - 1), max_size=3))) if t else [] for t in range(n)]
    runtimes = [float(data.draw(st.integers(0, 30))) for _ in range(n)]
    finish = alone_schedule(runtimes, parents, 3, 1, 0.0)
    phase = levels(parents)
    lax = float(data.draw(st.integers(0, 200)))
    shares = phase_laxities(lax, phase, runtimes, finish, 0.0)
    deadline = max(finish) + lax
    args = (deadline, phase, runtimes, parents, finish, shares)
    sd0 = sub_deadlines(*args, topological_order(parents), "none")
    sd = sub_deadlines(*args, topological_order(parents))
    assert sd == sub_deadlines(*args, list(range(n))[::-1])  # no cascade: the order does not matter
    children = [[c for c in range(n) if p in parents[c]] for p in range(n)]
    for p in range(n):
        assert sd[p] >= sd0[p]
        if sd[p] > sd0[p]:  # lifted: never past what a child needs, never past its co-parents
            assert all(sd[p] <= sd0[c] - runtimes[c] for c in children[p])
            assert any(sd[p] <= sd0[q] for c in children[p] if len(parents[c]) > 1 for q in parents[c])


def test_signed_laxity_gives_sub_deadlines_before_the_set_completions() -> None:
    # d = 14 < s + SET^R = 18: L = −4; distributed signed, PD shares −2, −1.5, −0.5 → cumulative
    # −2, −3.5, −4. sd0 = 12 (before task 0's own completion at 14), sd1 = 16 − 3.5 = 12.5 → aligned to
    # min(13.5, 14 − 1) = 13, sd2 = 17 − 3.5 = 13.5, sd3 = 14.
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


@pytest.mark.parametrize(("rule", "sd_a"), [("zero", 12.0), ("signed", 9.6)])
def test_a_negative_true_laxity_is_distributed_as_zero(rule: str, sd_a: float) -> None:
    # one slot; workflow 0 (a 10 s task) is planned first at [0, 10). Workflow 1: a (2) → b (3), d = 12.
    # TL: on the live plan a [10,12), b [12,15): L = 12 − 0 − 15 = −3. zero: sub-deadlines are the SET
    # schedule's completions, sd_a = 12 (last phase: d). signed: ET 12, 3 → shares −2.4, −0.6 →
    # sd_a = 12 − 2.4 = 9.6, before a can possibly end.
    wfs = [workflow(0, [(10, ())], 100.0), workflow(1, [(2, ()), (3, (0,))], 12.0)]
    result = simulate_workflows(wfs, 1, 1, laxity="tl", negative_laxity=rule)
    assert sub_deadline_of(result, 100) == pytest.approx(sd_a)
    assert sub_deadline_of(result, 101) == 12.0
