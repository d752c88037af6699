"""The engine's workflow rules: earliest start, machine range, zero-length tasks, policy statistics."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from sim.core import Cluster, Job, PolicyStats, Start, Workflow, Workload
from sim.engine import SchedulingError, simulate
from sim.invariants import InvariantViolation, check_schedule
from sim.policies.base import EngineView
from sim.run import run
from sim.workflows.metrics import TaskTable


def task(tid: int, wf: int, runtime: float, parents: tuple[int, ...] = (), arrival: float = 0.0) -> Job:
    return Job(tid, arrival, (1,), runtime, runtime, workflow=wf, parents=parents)


class Scripted:
    """Starts the given (time, task id, machine) decisions, in list order, at their times."""

    name = "scripted"
    preserves_order = False
    workload_kinds = frozenset({"workflow"})

    def __init__(self, plan: list[tuple[float, int, int]]) -> None:
        self.plan = plan
        self.jobs: dict[int, Job] = {}
        self.completed: list[tuple[int, float]] = []

    def attach(self, view: EngineView) -> None:
        self.view = view

    def submit(self, job: Job, now: float) -> None:
        self.jobs[job.id] = job

    def complete(self, job: Job, now: float) -> None:
        self.completed.append((job.id, now))

    def schedule(self, now: float) -> Sequence[Start]:
        return [Start(self.jobs[j], m) for t, j, m in self.plan if t == now and j in self.jobs]

    def next_wakeup(self, now: float) -> float | None:
        return min((t for t, _, _ in self.plan if t > now), default=None)

    def workflow_done(self, workflow: int) -> PolicyStats:
        return PolicyStats(seconds_by_job={workflow: 0.5}, task_values={"sub_deadline": {0: 7.0}})

    def stats(self) -> PolicyStats:
        return PolicyStats({"remap/attempts": 3.0})


def one_workflow(earliest: float = 5.0, deadline: float = 20.0) -> Workflow:
    tasks = (task(0, 0, 4.0), task(1, 0, 0.0, (0,)), task(2, 0, 3.0, (1,)))
    return Workflow(0, 0.0, earliest, deadline, tasks, set_r=7.0, work=7.0, critical_path=7.0)


CLUSTER = Cluster.slotted(2, 1)


def test_zero_length_task_lets_its_child_start_in_the_same_pass() -> None:
    wf = one_workflow()
    policy = Scripted([(5.0, 0, 0), (9.0, 1, 1), (9.0, 2, 0)])
    result = simulate(wf.tasks, CLUSTER, policy, workflows=[wf], check=True)
    spans = {r.job.id: (r.start, r.end, r.machine) for r in result.records}
    assert spans == {0: (5.0, 9.0, 0), 1: (9.0, 9.0, 1), 2: (9.0, 12.0, 0)}
    assert policy.completed == [(0, 9.0), (1, 9.0), (2, 12.0)]
    assert result.passes == 4  # t = 0, 5, 9, 12: the zero-length task adds no pass at 9


def test_a_task_before_its_workflows_earliest_start_is_refused() -> None:
    wf = one_workflow(earliest=5.0)
    with pytest.raises(SchedulingError, match=r"before its workflow's earliest start 5.0"):
        simulate(wf.tasks, CLUSTER, Scripted([(0.0, 0, 0), (4.0, 1, 0), (4.0, 2, 0)]), workflows=[wf])


@pytest.mark.parametrize("machine", [2, -1])
def test_a_machine_index_out_of_range_is_refused(machine: int) -> None:
    wf = one_workflow()
    with pytest.raises(SchedulingError, match=r"machine .* the cluster has machines 0\.\.1"):
        simulate(wf.tasks, CLUSTER, Scripted([(5.0, 0, machine)]), workflows=[wf])


def test_the_checker_catches_an_early_start_and_a_bad_machine() -> None:
    wf = one_workflow(earliest=5.0)
    good = simulate(wf.tasks, CLUSTER, Scripted([(5.0, 0, 0), (9.0, 1, 0), (9.0, 2, 1)]), workflows=[wf])
    early = type(good)(good.records, good.cluster, good.policy, good.passes, good.stats, (one_workflow(6.0),))
    with pytest.raises(InvariantViolation, match=r"earliest start 6.0"):
        check_schedule(wf.tasks, early)
    moved = [type(r)(r.job, r.start, r.end, 5) for r in good.records]
    with pytest.raises(InvariantViolation, match="on machine 5 of 2"):
        check_schedule(wf.tasks, type(good)(moved, good.cluster, good.policy, good.passes))


def test_policy_statistics_reach_the_summary_and_tables() -> None:
    wf = one_workflow(deadline=11.0)
    workload = Workload(kind="workflow", workflows=(wf,))
    tasks = TaskTable()
    done = run(workload, CLUSTER, Scripted([(5.0, 0, 0), (9.0, 1, 0), (9.0, 2, 1)]), tasks=tasks)
    assert done.summary["remap/attempts"] == 3.0
    assert done.summary["overhead/mean_s"] == 0.5
    assert done.summary["late/proportion"] == 1.0  # completes at 12 > 11
    assert done.summary["turnaround/mean"] == 12.0 - 5.0
    assert {k: v for k, v in tasks.columns.items() if k != "sub_deadline"} == {
        "job_id": [0, 0, 0], "task_id": [0, 1, 2], "resource": [0, 0, 1], "start": [5.0, 9.0, 9.0],
        "end": [9.0, 9.0, 12.0]}
    sub = tasks.columns["sub_deadline"]
    assert sub[0] == 7.0 and math.isnan(sub[1]) and math.isnan(sub[2])
    assert done.tables == {"workflows": {"job_id": [0], "arrival": [0.0], "earliest_start": [5.0], "deadline": [11.0],
                                         "completion": [12.0], "late": [True]}}
    result = simulate(wf.tasks, CLUSTER, Scripted([(5.0, 0, 0), (9.0, 1, 0), (9.0, 2, 1)]), workflows=[wf])
    assert result.stats == PolicyStats({"remap/attempts": 3.0}, {0: 0.5}, {"sub_deadline": {0: 7.0}})


def test_per_workflow_values_from_stats_are_refused() -> None:
    class Late(Scripted):
        def stats(self) -> PolicyStats:
            return PolicyStats({}, {0: 0.5})

    wf = one_workflow()
    with pytest.raises(SchedulingError, match=r"per-workflow values; .* from workflow_done\(\)"):
        simulate(wf.tasks, CLUSTER, Late([(5.0, 0, 0), (9.0, 1, 0), (9.0, 2, 1)]), workflows=[wf])


def test_a_policy_is_refused_on_a_workload_kind_it_cannot_schedule() -> None:
    from sim.core import InputError
    from sim.policies import policy_from_conf

    wf = one_workflow()
    workload = Workload(kind="workflow", workflows=(wf,))
    with pytest.raises(InputError, match="policy 'easy' schedules hpc or multires workloads, not workflow"):
        run(workload, CLUSTER, policy_from_conf("easy"))


def test_the_end_of_sweep_table_shows_workflow_metrics() -> None:
    from sweeps.summary import format_policy_table

    text = format_policy_table([("rmdcwf", {}, {"late/proportion": 0.25, "turnaround/mean": 9.0,
                                                 "overhead/mean_s": 0.002, "util": 0.5})])
    header, row = text.splitlines()
    assert header.split() == ["policy", "runs", "late/proportion", "turnaround/mean", "overhead/mean_s", "util"]
    assert row.split() == ["rmdcwf", "1", "0.25", "9", "0.002", "0.5"]
