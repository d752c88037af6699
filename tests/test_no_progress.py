"""A policy that wakes up forever and starts nothing ends its run with one line (issue 37); a policy
that waits for a time still finishes; a job the engine cannot start is named precisely; Ctrl-C on
``python -m sim`` is one line."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from sim import Cluster, Job, SchedulingError, Start, Workload, rigid_job, simulate
from sim.core import Workflow
from sim.policies.base import BasePolicy
from sim.run import run
from sim.stall import IDLE_WAKEUPS, IDLE_WAKEUPS_MAX
from tests.conftest import REPO
from tests.policy_helpers import Hang, Idle

HANG = ("Hang: no progress at t=1000.0: 1 job waits on an idle machine with no arrivals or completions left, "
        "and the policy's 1000 wake-ups since t=0.0 started nothing")


class Stepping(Idle):
    """Never starts anything; wakes up every ``step`` seconds."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self.step = step

    def next_wakeup(self, now: float) -> float | None:
        return now + self.step


class Patient(BasePolicy):
    """Starts each job at its time in ``plan`` (job id → time), waking up every ``step`` seconds while a
    job waits (only at the planned times when ``step`` is ``None``): a reservation kept although the
    machine went idle earlier, as conservative backfilling without compression keeps it."""

    def __init__(self, plan: dict[int, float], step: float | None = None) -> None:
        self.plan = plan
        self.step = step
        self.waiting: dict[int, Job] = {}

    def submit(self, job: Job, now: float) -> None:
        self.waiting[job.id] = job

    def schedule(self, now: float) -> Sequence[Start]:
        due = [job for job in self.waiting.values() if self.plan[job.id] <= now]
        for job in due:
            del self.waiting[job.id]
        return [Start(job) for job in due]

    def next_wakeup(self, now: float) -> float | None:
        later = min((self.plan[j] for j in self.waiting), default=None)
        if later is None or self.step is None:
            return later
        return min(later, now + self.step)


def test_a_policy_whose_wake_ups_start_nothing_ends_in_one_line() -> None:
    began = time.perf_counter()
    with pytest.raises(SchedulingError) as raised:
        simulate([rigid_job(0, 0, 4, 200)], Cluster.nodes(10), Hang())
    assert str(raised.value) == HANG
    assert time.perf_counter() - began < 1


def test_a_sweep_run_of_that_policy_fails_the_same_way() -> None:
    """``sim.run.run`` is what every sweep worker calls."""
    jobs = [rigid_job(i, 10 * i, 4, 100, 50) for i in range(3)]
    with pytest.raises(SchedulingError, match=r"^Hang: no progress at t=1020\.0: 3 jobs wait .* since t=20\.0 "):
        run(Workload(jobs), Cluster.nodes(10), Hang())


@pytest.mark.parametrize(("step", "wakeups"), [(1e-6, IDLE_WAKEUPS_MAX), (1e6, IDLE_WAKEUPS)])
def test_any_wake_up_step_ends(step: float, wakeups: int) -> None:
    """A step too small to reach the horizon stops at the backstop; a huge one right after IDLE_WAKEUPS."""
    with pytest.raises(SchedulingError, match=rf"the policy's {wakeups} wake-ups since t=0\.0 started nothing"):
        simulate([rigid_job(0, 0, 4, 200)], Cluster.nodes(10), Stepping(step), check=False)


def test_a_workflow_policy_that_starts_nothing_ends_too() -> None:
    class HangingWorkflows(Patient):
        workload_kinds = frozenset({"workflow"})

    tasks = (Job(0, 0.0, (1,), 5.0, 5.0, workflow=0), Job(1, 0.0, (1,), 5.0, 5.0, workflow=0, parents=(0,)))
    workload = Workload(kind="workflow", workflows=[Workflow(0, 0.0, 0.0, 50.0, tasks)])
    with pytest.raises(SchedulingError, match=r"^HangingWorkflows: no progress at t=1000\.0: 2 jobs wait"):
        run(workload, Cluster.slotted(1, 1), HangingWorkflows({0: math.inf, 1: math.inf}, 1.0))


def test_without_a_wake_up_the_jobs_left_are_named() -> None:
    with pytest.raises(SchedulingError, match=r"^Idle: 2 jobs never started \(first: \[0, 1\]\)$"):
        simulate([rigid_job(0, 0, 4, 200), rigid_job(1, 5, 4, 200)], Cluster.nodes(10), Idle())


@pytest.mark.parametrize("step", [None, 1.0])
def test_a_reservation_behind_a_job_that_ended_early_is_kept(step: float | None) -> None:
    """Job 0 plans 5000 s and ends at 10; job 1 was promised its planned end. Polling every second
    makes 4990 wake-ups that start nothing, well past IDLE_WAKEUPS, but not past the horizon."""
    jobs = [rigid_job(0, 0, 8, 5000, 10), rigid_job(1, 0, 8, 100)]
    result = simulate(jobs, Cluster.nodes(10), Patient({0: 0.0, 1: 5000.0}, step))
    assert [(r.start, r.end) for r in result.records] == [(0.0, 10.0), (5000.0, 5100.0)]


def test_a_workflow_waiting_for_its_earliest_start_is_kept() -> None:
    class Workflows(Patient):
        workload_kinds = frozenset({"workflow"})

    tasks = (Job(0, 0.0, (1,), 5.0, 5.0, workflow=0),)
    wf = Workflow(0, 0.0, 20_000.0, 30_000.0, tasks)
    done = run(Workload(kind="workflow", workflows=[wf]), Cluster.slotted(1, 1), Workflows({0: 20_000.0}, 1.0))
    assert done.tables["workflows"]["completion"] == [20_005.0]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 1000), st.integers(0, 1000), st.floats(0.5, 100.0), st.integers(0, 500))
def test_a_kept_reservation_is_never_stopped(limit: int, runtime: int, step: float, other: int) -> None:
    """Whatever job 0's limit and run time and the polling step, job 1 starts at job 0's planned end."""
    jobs = [rigid_job(0, 0, 8, limit, min(runtime, limit)), rigid_job(1, 0, 8, 1 + other)]
    result = simulate(jobs, Cluster.nodes(10), Patient({0: 0.0, 1: float(limit)}, step))
    assert result.records[1].start == limit


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 500), min_size=1, max_size=5), st.floats(0.5, 1000.0))
def test_wake_ups_that_start_nothing_stop_soon_after_the_horizon(limits: list[int], step: float) -> None:
    """The run ends at the first wake-up (from the IDLE_WAKEUPS-th on) past the horizon, here the
    longest time limit of the waiting jobs."""
    jobs = [rigid_job(i, 0, 4, limit) for i, limit in enumerate(limits)]
    with pytest.raises(SchedulingError) as raised:
        simulate(jobs, Cluster.nodes(10), Stepping(step), check=False)
    wakeups = int(str(raised.value).split("the policy's ")[1].split()[0])
    assert wakeups == IDLE_WAKEUPS or IDLE_WAKEUPS < wakeups <= math.ceil(max(limits) / step) + 1


class Twice(Idle):
    """Starts job ``first`` at time 0, then the job ``again`` at time ``at``."""

    def __init__(self, again: Job, at: float) -> None:
        super().__init__()
        self.again, self.at = again, at

    def schedule(self, now: float) -> Sequence[Start]:
        if now == 0:
            return [Start(self.waiting[0])]
        return [Start(self.again)] if now == self.at else []

    def next_wakeup(self, now: float) -> float | None:
        return self.at if now < self.at else None


@pytest.mark.parametrize(("again", "at", "message"), [
    (rigid_job(0, 0, 4, 100), 50.0, "job 0 started twice (it has been running since t=0.0)"),
    (rigid_job(0, 0, 4, 100), 150.0, "job 0 started twice (it already ran)"),
    (rigid_job(10_000_000, 0, 4, 100), 50.0, "job 10000000 is not a job of this run (no job of that id was submitted)"),
    (rigid_job(10_000_000, 300, 4, 100), 50.0, "job 10000000 started at 50.0 before its submission"),
])
def test_a_job_that_is_not_waiting_is_named_precisely(again: Job, at: float, message: str) -> None:
    jobs = [rigid_job(0, 0, 4, 100), rigid_job(1, 0, 8, 100)]
    with pytest.raises(SchedulingError) as raised:
        simulate(jobs, Cluster.nodes(10), Twice(again, at))
    assert str(raised.value) == f"Twice: {message}"


def cli(*args: str, **popen: object) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    return subprocess.Popen([sys.executable, "-m", "sim", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def test_the_command_line_ends_that_policy_with_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_submit_time,num_nodes,time_limit\n0,4,200\n")
    out, err = cli(str(trace), "--nodes", "10", "--policy", "policy_helpers:Hang").communicate(timeout=60)
    assert (out, err) == ("", f"error: {HANG}\n")


def test_ctrl_c_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    trace, ready, schedule = tmp_path / "t.csv", tmp_path / "ready", tmp_path / "schedule.csv"
    trace.write_text("job_submit_time,num_nodes,time_limit\n0,4,200\n")
    proc = cli(str(trace), "--nodes", "10", "--policy", "policy_helpers:Stuck", "--policy-option", f"ready={ready}",
               "--out", str(schedule))
    deadline = time.monotonic() + 30
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (130, "", "interrupted\n")
    assert not schedule.exists() and not schedule.with_name("schedule.csv.tmp").exists()
