"""Workflow runs stream (issue 27 B7): the metrics folded as workflows finish are bit-identical to the
eager computation over the whole schedule (the code before streaming, kept below as the oracle), the
stream is built lazily, and finished workflows leave the engine, the policy and the planner."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim.policies.rmdcwf
from sim.core import Cluster, InputError, SimulationResult, Workflow, Workload
from sim.engine import simulate
from sim.policies import policy_from_conf
from sim.run import run
from sim.workflows.metrics import RunningSum, TaskTable
from sim.workflows.stream import workflow_stream
from tests.rmdcwf_cases import workflow
from tests.test_rmdcwf_properties import CONFIGS, streams

# --- the oracle: sim/workflows/metrics.py before streaming (whole-schedule sums) --------------------


def _completions(result: SimulationResult) -> dict[int, float]:
    out: dict[int, float] = {}
    for r in result.records:
        wf = r.job.workflow
        if r.end > out.get(wf, -math.inf):
            out[wf] = r.end
    return out


def oracle_summary(result: SimulationResult, warmup: int = 0) -> dict[str, float]:
    done = _completions(result)
    measured = sorted(result.workflows, key=lambda wf: (wf.arrival, wf.id))[warmup:]
    late = sum(done[wf.id] > wf.deadline for wf in measured)
    summary = {
        "jobs": float(len(measured)),
        "late/proportion": late / len(measured),
        "turnaround/mean": sum(done[wf.id] - wf.earliest_start for wf in measured) / len(measured),
    }
    seconds = result.stats.seconds_by_job
    if seconds:
        summary["overhead/mean_s"] = sum(seconds.get(wf.id, 0.0) for wf in measured) / len(measured)
    slots = sum(result.cluster.total)
    first = min(wf.arrival for wf in result.workflows)
    last_arrival = max(wf.arrival for wf in result.workflows)
    span = max(r.end for r in result.records) - first if result.records else 0.0
    busy = sum(r.end - r.start for r in result.records)
    summary["util"] = busy / (slots * span) if span > 0 else math.nan
    work = sum(wf.work for wf in result.workflows)
    window = last_arrival - first
    summary["load/offered"] = work / (slots * window) if window > 0 else math.nan
    return summary


def oracle_tasks(result: SimulationResult) -> dict[str, list[Any]]:
    record = {r.job.id: r for r in result.records}
    sub = result.stats.task_values.get("sub_deadline", {})
    columns: dict[str, list[Any]] = {k: [] for k in ("job_id", "task_id", "resource", "start", "end", "sub_deadline")}
    for wf in result.workflows:
        for index, task in enumerate(wf.tasks):
            r = record[task.id]
            for name, value in zip(columns, (wf.id, index, r.machine, r.start, r.end, sub.get(task.id, math.nan)),
                                   strict=True):
                columns[name].append(value)
    return columns


def oracle_workflows(result: SimulationResult) -> dict[str, list[Any]]:
    done = _completions(result)
    rows = [(wf.id, wf.arrival, wf.earliest_start, wf.deadline, done[wf.id], done[wf.id] > wf.deadline)
            for wf in result.workflows]
    names = ("job_id", "arrival", "earliest_start", "deadline", "completion", "late")
    return {name: [row[k] for row in rows] for k, name in enumerate(names)}


# --- helpers -------------------------------------------------------------------------------------------


class Clock:
    """A deterministic ``time`` for the planner: each run sees the same planning seconds."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.001 * math.pi
        return self.now


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, NaN equal to NaN (bit-identical floats)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


def folded_and_oracle(workflows: tuple[Workflow, ...], cluster: Cluster, policy: str, options: dict[str, Any],
                      warmup: int) -> tuple[tuple, tuple]:
    """(summary, tasks, workflows) of a streamed run() and of the oracle over simulate()'s whole schedule."""
    tasks = TaskTable()
    with patch.object(sim.policies.rmdcwf, "time", Clock()):
        done = run(Workload(kind="workflow", workflows=iter(workflows), warmup=warmup), cluster,
                   policy_from_conf(policy, **options), tasks=tasks)
    with patch.object(sim.policies.rmdcwf, "time", Clock()):
        result = simulate([t for wf in workflows for t in wf.tasks], cluster, policy_from_conf(policy, **options),
                          workflows=workflows)
    oracle = oracle_summary(result, warmup) | result.stats.counters
    return (done.summary, tasks.columns, done.tables), (oracle, oracle_tasks(result),
                                                        {"workflows": oracle_workflows(result)})


# --- bit-identical to the eager computation ------------------------------------------------------------

@pytest.mark.parametrize(("policy", "options"), CONFIGS[:8:3] + CONFIGS[-1:],
                         ids=lambda x: str(x) if isinstance(x, str) else "-".join(map(str, x.values())) or "defaults")
@settings(max_examples=40, deadline=None)
@given(stream=streams(), warmup=st.integers(0, 5))
def test_folded_metrics_equal_the_whole_schedule_computation(policy: str, options: dict[str, Any],
                                                             stream: tuple[list[Workflow], int, int],
                                                             warmup: int) -> None:
    wfs, m, c = stream
    warmup = min(warmup, len(wfs) - 1)
    folded, oracle = folded_and_oracle(tuple(wfs), Cluster.slotted(m, c), policy, options, warmup)
    assert same(folded[0], oracle[0]) and same(folded[1], oracle[1]) and same(folded[2], oracle[2])


@pytest.mark.parametrize(("kind", "rate", "policy", "options"), [
    ("ligo", 1 / 30, "rmdcwf", {}), ("genome", 1 / 400, "rmdcwf", {"laxity": "tl", "tsp": "tsp2"}),
    ("cybershake", 1 / 10, "rmdcwf", {"laxity_distribution": "ed"}), ("ligo", 1 / 20, "fifo_workflow", {})])
def test_a_generated_stream_folds_to_the_whole_schedule_numbers(kind: str, rate: float, policy: str,
                                                                options: dict[str, Any]) -> None:
    stream = workflow_stream(np.random.default_rng(11), kind, jobs=60, warmup=6, arrival_rate=rate, s_max=2_000,
                             em_max=3.0, machines=5, slots=2).workflows
    folded, oracle = folded_and_oracle(tuple(stream), Cluster.slotted(5, 2), policy, options, 6)
    assert folded[0]["late/proportion"] > 0 or policy == "fifo_workflow" or kind != "ligo"  # a loaded system
    assert same(folded[0], oracle[0]) and same(folded[1], oracle[1]) and same(folded[2], oracle[2])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300), max_size=40))
def test_a_running_sum_is_the_builtin_sum(values: list[float]) -> None:
    total = RunningSum()
    for x in values:
        total.add(x)
    assert total.value == sum(values) and math.copysign(1, total.value) == math.copysign(1, sum(values))


def test_the_compensated_running_sum_is_python_3_12s_sum() -> None:
    """Python 3.12's sum adds floats with Neumaier's compensation (values printed by CPython 3.12.1)."""
    for values, expected in (([0.1] * 10, 1.0), ([1e100, 1.0, -1e100, 1.0], 2.0), ([0.1, 0.2, 0.3], 0.6),
                             ([1e308, 1e308, -1e308], math.inf)):
        total = RunningSum(compensated=True)
        for x in values:
            total.add(x)
        assert total.value == expected


# --- lazy stream, nothing kept -------------------------------------------------------------------------

def live(kind: type) -> int:
    return sum(isinstance(o, kind) for o in gc.get_objects())


def test_finished_workflows_are_released(monkeypatch: pytest.MonkeyPatch) -> None:
    """400 workflows, a few unfinished at any time: the workflows alive while the stream is built stay
    few (the checks, which keep the schedule, are off), and the policy keeps nothing once they finish."""
    monkeypatch.setenv("SCHEDLAB_CHECK_INVARIANTS", "0")
    stream = workflow_stream(np.random.default_rng(2), "ligo", jobs=400, arrival_rate=1 / 300, s_max=10, em_max=3.0,
                             machines=50, slots=2, warmup=40)  # offered load 0.4
    alive = []
    gc.collect()
    before = live(Workflow)  # other tests' workflows (module-level streams) are not this run's

    def watched() -> Iterator[Workflow]:
        for wf in stream.workflows:
            if wf.id % 100 == 99:
                alive.append(live(Workflow) - before)
            yield wf

    policy = policy_from_conf("rmdcwf")
    done = run(Workload(kind="workflow", workflows=watched(), warmup=40), Cluster.slotted(50, 2), policy)
    assert done.summary["jobs"] == 360 and len(alive) == 4 and max(alive) < 40, alive
    assert done.result.records == [] and policy.view is not None and policy.view.workflows == {}
    assert policy._seconds == {} and policy._sub_deadline == {} and policy._planner.plans == {}


def test_workflows_out_of_order_or_repeated_are_refused() -> None:
    a, b = workflow(0, [(1, ())], 10.0, arrival=5.0), workflow(1, [(1, ())], 10.0, arrival=2.0)
    with pytest.raises(InputError, match=r"workflow 1 \(arrival 2.0\) comes after workflow 0 .* \(arrival, id\) order"):
        run(Workload(kind="workflow", workflows=(a, b)), Cluster.slotted(1, 1), policy_from_conf("rmdcwf"))
    with pytest.raises(InputError, match="jobs must be empty"):
        run(Workload(list(a.tasks), kind="workflow", workflows=(a,)), Cluster.slotted(1, 1), policy_from_conf("rmdcwf"))
    orphan = Workflow(3, 0.0, 0.0, 9.0, (*a.tasks,))
    with pytest.raises(InputError, match="workflow 3: task 0 has workflow 0"):
        run(Workload(kind="workflow", workflows=(orphan,)), Cluster.slotted(1, 1), policy_from_conf("rmdcwf"))
