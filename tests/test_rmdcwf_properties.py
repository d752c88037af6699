"""Invariants of RM-DCWF (all 8 PD/ED × SL/TL × TSP1/TSP2 configurations, the options) and FIFO on
random small workflow streams. The engine and the invariant checker (on in tests) enforce slot
capacity, precedence, no task before s_j and each task once; here: late ⇔ completion > deadline,
plan = execution, determinism and that sub-deadlines exist for every task."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.core import Workflow
from sim.workflows.budget import alone_schedule, schedule_length
from sim.workflows.metrics import completions, workflow_table
from tests.rmdcwf_cases import simulate_workflows, workflow

CONFIGS = [("rmdcwf", {"laxity_distribution": d, "laxity": lax, "tsp": tsp})
           for d, lax, tsp in itertools.product(("pd", "ed"), ("sl", "tl"), ("tsp1", "tsp2"))]
CONFIGS += [("rmdcwf", {"phase_length": "max_task", "tsp": "tsp2"}), ("rmdcwf", {"remap_trigger": "deadline"}),
            ("rmdcwf", {"remap_cap": 1, "laxity": "tl"}), ("fifo_workflow", {})]


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[Workflow], int, int]:
    m, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    wfs, arrival = [], 0
    for wf_id in range(draw(st.integers(1, 6))):
        arrival += draw(st.integers(0, 6))
        n = draw(st.integers(1, 5))
        tasks = [(draw(st.integers(0, 6)), tuple(draw(st.sets(st.integers(0, i - 1), max_size=2)) if i else ()))
                 for i in range(n)]
        start = arrival + draw(st.integers(0, 5))
        alone = alone_schedule([float(e) for e, _ in tasks], [list(p) for _, p in tasks], m, c, start)
        set_r = schedule_length(alone, start)
        deadline = math.ceil(start + set_r * draw(st.floats(0.5, 3.0)))  # some impossible, some loose
        wfs.append(workflow(wf_id, tasks, float(deadline), float(arrival), float(start)))
    return wfs, m, c


@pytest.mark.parametrize(("policy", "options"), CONFIGS, ids=lambda x: str(x) if isinstance(x, str) else
                         "-".join(map(str, x.values())) or "defaults")
@settings(max_examples=40, deadline=None)
@given(stream=streams())
def test_invariants_on_random_streams(policy: str, options: dict[str, object],
                                      stream: tuple[list[Workflow], int, int]) -> None:
    wfs, m, c = stream
    result = simulate_workflows(wfs, m, c, policy, **options)  # engine + invariant checker validate it
    done = completions(result)
    table = workflow_table(result)
    assert table["late"] == [done[wf.id] > wf.deadline for wf in wfs]
    assert all(r.start >= wf.earliest_start for wf in wfs for r in result.records if r.job.workflow == wf.id)
    again = simulate_workflows(wfs, m, c, policy, **options)
    assert [(r.job.id, r.start, r.machine) for r in again.records] == [(r.job.id, r.start, r.machine)
                                                                        for r in result.records]
    sub = result.stats.task_values.get("sub_deadline", {})
    assert set(sub) == ({t.id for wf in wfs for t in wf.tasks} if policy == "rmdcwf" else set())
    assert set(result.stats.seconds_by_job) == {wf.id for wf in wfs}
    counters = result.stats.counters
    assert counters.get("remap/successes", 0) <= counters.get("remap/attempts", 0)


@settings(max_examples=100, deadline=None)
@given(stream=streams())
def test_a_lone_workflow_under_fifo_runs_exactly_its_set_r_schedule(stream: tuple[list[Workflow], int, int]) -> None:
    # FIFO maps by (run time, index) from s_j on an empty system: the very schedule alone_schedule
    # computes (the one the generators draw deadlines from)
    wfs, m, c = stream
    wf = wfs[0]
    finish = alone_schedule([t.runtime for t in wf.tasks], [[p - 100 * wf.id for p in t.parents] for t in wf.tasks],
                            m, c, wf.earliest_start)
    assert [r.end for r in simulate_workflows([wf], m, c, "fifo_workflow").records] == finish
