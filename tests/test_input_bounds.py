"""Issue 26 (items 3 and 4, the ``sim/`` cases): every bad or absurdly large input ends in one clear
line — an :class:`InputError`, exit status 2 on the command line — never a traceback, a hang or
silently wrong numbers; and a wide fan-out plans in near-linear time with the schedule it always had."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim.workflows.calendar
import sim.workflows.limits
import sim.workloads.errors
from sim.__main__ import main
from sim.core import Cluster, InputError, JobRecord, SimulationResult, Workload, rigid_job
from sim.metrics import summarize
from sim.policies.rmdcwf import rmdcwf
from sim.run import run
from sim.workflows.calendar import Calendar
from sim.workflows.files import read_stream
from sim.workflows.mapping import sweep_order
from sim.workflows.metrics import TaskTable, workflow_summary
from sim.workflows.stream import make_workflow, workflow_stream
from sim.workflows.wfformat import read_wfformat
from sim.workloads import load_trace, synthetic_hpc
from sim.workloads.csv_traces import parse_jobs_csv
from sim.workloads.swf import parse_swf
from sweeps.specs import MapReduceStream, MMcQueue, SlottedCluster, SyntheticHpc, WorkflowStream
from tests.conftest import REPO

RECORD = "{} 0 -1 100 4 -1 -1 4 100 -1 1 1 -1 -1 -1 -1 -1 -1\n"  # one SWF job numbered {}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def assert_one_line(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert all(fragment in done.stderr for fragment in fragments), done.stderr


def stream_file(tmp_path: Path, m: int = 2, c_r: int = 1, tasks: int = 3, runtime: float = 5.0, **job: float) -> Path:
    """One job: task 0 (``runtime``), then ``tasks`` − 1 children of 5 s."""
    spec = {"id": 0, "arrival": 0.0, "earliest_start": 0.0, "deadline": 100.0, **job,
            "tasks": [{"id": 0, "runtime": runtime, "parents": []}]
            + [{"id": i, "runtime": 5.0, "parents": [0]} for i in range(1, tasks)]}
    path = tmp_path / "stream.json"
    path.write_text(json.dumps({"m": m, "c_r": c_r, "jobs": [spec]}))
    return path


# --- A: workflow inputs are bounded like traces ------------------------------------------------------

@pytest.mark.parametrize(("header", "fragment"), [
    ({"m": 1_000_000_000}, "'m' must be at most 100,000 (resources"),
    ({"c_r": 1_000_000}, "'c_r' must be at most 1,000 (slots per resource"),
])
def test_cli_refuses_a_system_beyond_the_limits(tmp_path: Path, header: dict, fragment: str) -> None:
    assert_one_line(cli(str(stream_file(tmp_path, **header)), "--policy", "rmdcwf"), "stream.json: ", fragment)


@pytest.mark.parametrize(("job", "fragment"), [
    ({"runtime": 1e300}, "job 0: task 0: runtime: expected a time in seconds, 0 ≤ t ≤ 1e+10"),
    ({"arrival": 1e300, "earliest_start": 1e300, "deadline": 1e300},
     "job 0: arrival: expected a time in seconds, 0 ≤ t ≤ 1e+10"),
])
def test_cli_refuses_times_beyond_the_trace_bound(tmp_path: Path, job: dict, fragment: str) -> None:
    assert_one_line(cli(str(stream_file(tmp_path, **job)), "--policy", "rmdcwf"), "stream.json: ", fragment)


@pytest.mark.parametrize(("job", "message"), [
    ({"earliest_start": 2e10, "deadline": 3e10}, r"job 0: earliest_start: expected a time in seconds, 0 ≤ t ≤ 1e\+10"),
    ({"deadline": 1e300}, r"job 0: deadline: expected a time in seconds"),
])
def test_stream_file_times_are_bounded(tmp_path: Path, job: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_stream(stream_file(tmp_path, **job))


def test_stream_file_refuses_too_many_tasks_and_too_much_planning(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sim.workflows.limits, "MAX_TASKS", 2)
    with pytest.raises(InputError, match=r"stream\.json: job 0: 3 tasks; a workflow may have at most 2"):
        read_stream(stream_file(tmp_path))
    monkeypatch.setattr(sim.workflows.limits, "MAX_TASKS", 100)
    monkeypatch.setattr(sim.workflows.limits, "MAX_PLANNING_WORK", 20)
    read_stream(stream_file(tmp_path, m=2, c_r=2, tasks=5))  # 5 × min(5, 4) = 20 slot visits: fine
    with pytest.raises(InputError, match=r"job 0: 6 tasks on m × c_r = 4 slots are too many to plan in reasonable "
                                         r"time: .* = 24 slots, at most 20 .*: up to 5 tasks fit this system"):
        read_stream(stream_file(tmp_path, m=2, c_r=2, tasks=6))


def test_a_task_shorter_than_the_clock_resolves_still_runs_after_its_parent(tmp_path: Path) -> None:
    """1e-7 s at t ≈ 1e10 (within the bounds) changes no float: the task is instant, not a SchedulingError."""
    t = 1e10 - 10
    workload, m, c_r = read_stream(stream_file(tmp_path, runtime=1e-7, arrival=t, earliest_start=t, deadline=1e10))
    tasks = TaskTable()
    run(workload, Cluster.slotted(m, c_r), rmdcwf(), tasks=tasks)
    assert list(zip(tasks.columns["start"], tasks.columns["end"], strict=True)) == [(t, t), (t, t + 5), (t, t + 5)]


def _instance(tasks: list[dict]) -> dict:
    return {"name": "w", "schemaVersion": "1.4", "workflow": {"tasks": tasks}}


def _task(name: str, runtime: float = 1.0, children: tuple[str, ...] = ()) -> dict:
    return {"name": name, "id": name, "runtimeInSeconds": runtime, "parents": [], "children": list(children)}


def test_a_wfformat_folder_with_a_bad_instance_is_refused_before_ray_starts(tmp_path: Path) -> None:
    """Every run of a WfFormat stream reads all of its folder's instances first: a bad one (duplicate task ids)
    is read on the driver, and the sweep stops before Ray starts instead of failing each run in a worker."""
    (tmp_path / "wf").mkdir()
    (tmp_path / "wf" / "good.json").write_text(json.dumps(_instance([_task("a", children=("b",)), _task("b")])))
    (tmp_path / "wf" / "bad.json").write_text(json.dumps(_instance([_task("a"), _task("c"), _task("c")])))
    proc = subprocess.run([sys.executable, str(REPO / "sweeps" / "run.py"), "-m", "workload=wfformat",
                           "workload.path=wf", "cluster=rmdcwf", "policy=rmdcwf", "seed=range(0,5)", "tracking=none",
                           "hydra.launcher.progress=false"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "duplicate task id 'c' (tasks at positions 1 and 2)" in proc.stderr and "all 5 runs" in proc.stderr
    assert "starting a local Ray" not in proc.stdout and "Traceback" not in proc.stderr
    assert "HYDRA_FULL_ERROR" not in proc.stderr


@pytest.mark.parametrize(("tasks", "message"), [
    ([_task("a", children=("b",)), _task("b", 1e300)], r"task 'b': runtime: expected a time in seconds, 0 ≤ t ≤ 1e"),
    ([_task("a", children=("c",)), _task("b"), _task("c"), _task("c")],
     r"duplicate task id 'c' \(tasks at positions 2 and 3\)"),
    ([{"id": ["x"], "runtimeInSeconds": 1.0}], r"task at position 0 needs an 'id' or 'name' \(a string\), got \['x'\]"),
    ([_task("a") | {"children": "b"}], r"task 'a': children must be a list of task ids, got 'b'"),
    ([_task("a") | {"parents": [["b"]]}], r"task 'a': unknown task \['b'\] in parents"),
])
def test_wfformat_bad_instances_name_file_and_task(tmp_path: Path, tasks: list[dict], message: str) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(_instance(tasks)))
    with pytest.raises(InputError, match=rf"^{path}: {message}"):
        read_wfformat(path)


def test_wfformat_refuses_too_many_tasks(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sim.workflows.limits, "MAX_TASKS", 2)
    path = tmp_path / "w.json"
    path.write_text(json.dumps(_instance([_task("a"), _task("b"), _task("c")])))
    with pytest.raises(InputError, match=rf"^{path}: 3 tasks; a workflow may have at most 2"):
        read_wfformat(path)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: SlottedCluster(m=10**9), r"cluster\.m must be at most 100,000"),
    (lambda: SlottedCluster(c_r=10**6), r"cluster\.c_r must be at most 1,000"),
    (lambda: WorkflowStream(n=10**9), r"workload\.n must be an integer task count ≤ 100,000"),
    (lambda: WorkflowStream(arrival_rate=1e-300), r"workload\.arrival_rate must be ≥ jobs / 1e\+10 s = 2e-07"),
    (lambda: WorkflowStream(s_max=10**11), r"workload\.s_max must be at most 1e\+10"),
    (lambda: MapReduceStream(maps=(1, 10**9)), r"workload\.maps and workload\.reduces allow 1,000,000,010 tasks"),
    (lambda: MapReduceStream(map_time=(1, 10**11)), r"workload\.map_time must stay within 1e\+10 s"),
    (lambda: SyntheticHpc(arrival_rate=1e-300), r"workload\.arrival_rate must be ≥ jobs / 1e\+10 s = 1e-07"),
    (lambda: MMcQueue(jobs=10, arrival_rate=1e-10), r"arrival_rate must be ≥ .* = 1e-09 jobs per second"),
])
def test_specs_refuse_parameters_beyond_the_bounds(build, message: str) -> None:
    with pytest.raises(InputError, match=message):
        build()


def test_a_generated_deadline_beyond_the_bound_names_the_workflow() -> None:
    with pytest.raises(InputError, match=r"^ligo\(n=50\): workflow 0: deadline: expected a time in seconds"):
        list(workflow_stream(np.random.default_rng(0), "ligo", jobs=1, arrival_rate=0.01, s_max=10, em_max=1e12,
                             machines=4, slots=2).workflows)  # each workflow is built when the run reaches it


# --- A: a wide fan-out plans in near-linear time, with the schedule it always had --------------------

FAN = [5.0, 7.0, 3.0, 3.0, 6.0, 2.0, 2.0, 4.0, 1.0, 8.0, 2.5, 3.5]  # task 0, then its 11 children


def fan_out_workload(runtimes: list[float], copies: int, m: int, c: int) -> Workload:
    """``copies`` fan-outs (task 0, all others its children) arriving 1 s apart, each with a tight deadline."""
    parents = [[]] + [[0]] * (len(runtimes) - 1)
    workflows, first = [], 0
    for j in range(copies):
        wf = make_workflow(j, first, float(j), float(j) + 2 * (j % 2), 20.0 - 4 * j, runtimes, parents, m, c)
        workflows.append(wf)
        first += len(runtimes)
    return Workload(kind="workflow", workflows=tuple(workflows))


def placements(workload: Workload, m: int, c: int, **options: str) -> list[tuple[int, float]]:
    tasks = TaskTable()
    run(workload, Cluster.slotted(m, c), rmdcwf(**options), tasks=tasks)
    return list(zip(tasks.columns["resource"], tasks.columns["start"], strict=True))


def test_wide_fan_out_schedule_equals_the_old_implementation() -> None:
    """Expected (resource, start) per task as computed by the implementation before issue 26 (which walked
    every interval of every slot per placement and swept the task order repeatedly)."""
    fan = [[]] + [[0]] * (len(FAN) - 1)
    workflows = (make_workflow(0, 0, 0.0, 0.0, 20.0, FAN, fan, 2, 2),
                 make_workflow(1, len(FAN), 1.0, 3.0, 16.0, FAN[:6], fan[:6], 2, 2))
    workload = Workload(kind="workflow", workflows=workflows)
    assert placements(workload, 2, 2) == [
        (0, 0.0), (1, 10.0), (1, 5.0), (1, 5.0), (0, 10.5), (1, 8.0), (0, 8.5), (0, 5.0), (0, 9.0), (0, 10.0),
        (1, 8.0), (0, 5.0), (1, 10.5), (0, 18.0), (1, 15.5), (0, 16.5), (1, 18.5), (1, 17.0)]
    assert placements(workload, 2, 2, tsp="tsp2") == [
        (0, 0.5555555555555554), (1, 8.0), (1, 17.0), (1, 17.0), (0, 8.5), (1, 15.0), (0, 14.5), (0, 16.0),
        (0, 15.0), (0, 7.0), (1, 14.5), (0, 16.5), (0, 3.0), (0, 20.0), (1, 8.0), (1, 11.0), (1, 20.0), (0, 20.0)]


@pytest.mark.parametrize("options", [{}, {"tsp": "tsp2"}, {"laxity": "tl"}, {"laxity_distribution": "ed"}])
def test_walking_runs_gives_the_schedule_of_walking_every_interval(monkeypatch, options: dict) -> None:
    """The calendar walks runs of touching intervals when the duration allows it; forcing the
    interval-by-interval walk everywhere must not move a single task (fractional times included)."""
    runtimes = [5.0] + [0.1 * (1 + (i * 7919) % 13) for i in range(1, 400)]
    workload = fan_out_workload(runtimes, 3, 3, 2)
    fast = placements(workload, 3, 2, **options)
    init = Calendar.__init__

    def interval_walk(self: Calendar, resources: int, slots: int) -> None:
        init(self, resources, slots)
        self._ulp = math.inf  # no duration is long enough to walk runs

    monkeypatch.setattr(sim.workflows.calendar.Calendar, "__init__", interval_walk)
    assert placements(workload, 3, 2, **options) == fast


def repeated_sweeps(parents: list[list[int]], order: list[int]) -> list[int]:
    """The pre-issue-26 order of placement: sweep ``order`` again and again, placing what is ready."""
    placed: list[int] = []
    pending = list(order)
    while pending:
        rest = []
        for t in pending:
            if any(p not in placed for p in parents[t]):
                rest.append(t)
            else:
                placed.append(t)
        pending = rest
    return placed


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[list[int]], list[int]]:
    n = draw(st.integers(1, 12))
    parents = [sorted(set(draw(st.lists(st.integers(0, t - 1), max_size=3)))) if t else [] for t in range(n)]
    return parents, draw(st.permutations(range(n)))


@settings(max_examples=200, deadline=None)
@given(dags())
def test_sweep_order_is_the_order_of_repeated_sweeps(dag: tuple[list[list[int]], list[int]]) -> None:
    parents, order = dag
    assert sweep_order(parents, order, ()) == repeated_sweeps(parents, order)


@st.composite
def float_calendars(draw: st.DrawFn) -> tuple[Calendar, Calendar]:
    """The same bookings twice; the second calendar always walks interval by interval."""
    fast, slow = Calendar(2, 2), Calendar(2, 2)
    slow._ulp = math.inf
    start = draw(st.sampled_from([0.0, 1e9]))
    for key in range(draw(st.integers(0, 25))):
        r, k = draw(st.integers(0, 1)), draw(st.integers(0, 1))
        e = draw(st.sampled_from([0.1, 0.3, 1.0, 2.5, 1e-7, 1e-8]))
        s = start + draw(st.sampled_from([0.0, 0.1, 0.3, 0.6, 1.0, 2.5, 3.0])) * draw(st.integers(0, 6))
        try:
            fast.insert(key, r, k, s, e)
        except ValueError:
            continue
        slow.insert(key, r, k, s, e)
        if draw(st.booleans()) and key % 3 == 0:
            fast.remove(key)
            slow.remove(key)
    return fast, slow


@settings(max_examples=300, deadline=None)
@given(float_calendars(), st.sampled_from([0.0, 0.3, 1.0, 2.0, 1e9, 1e9 + 0.3]),
       st.sampled_from([0.1, 0.2, 0.7, 1.0, 3.0, 1e-7, 1e-8]), st.sampled_from([0.0, 0.5, 4.0]))
def test_runs_answer_every_query_as_the_interval_walk(cals: tuple[Calendar, Calendar], t: float, e: float,
                                                       slack: float) -> None:
    fast, slow = cals
    assert fast.earliest(t, e) == slow.earliest(t, e)
    assert fast.latest(t, t + e + slack, e) == slow.latest(t, t + e + slack, e)
    for row in fast._rows.values():  # the runs are exactly the maximal chains of touching intervals
        for slot in row.values():
            runs = (list(slot.run_starts), list(slot.run_ends))
            slot.rebuild_runs()
            assert (slot.run_starts, slot.run_ends) == runs


def test_a_duration_the_clock_cannot_add_walks_interval_by_interval() -> None:
    """At t ≈ 1e9 s a float cannot add 1e-8 s: walking interval by interval, a query stops at the
    boundary of two touching intervals (as it always did), so the calendar walks runs only for
    durations it can add."""
    cal = Calendar(1, 1)
    cal.insert("a", 0, 0, 1e9, 0.25)
    cal.insert("b", 0, 0, 1e9 + 0.25, 0.25)
    assert cal.earliest(1e9 + 0.1, 1e-8) == (1e9 + 0.25, 0, 0)
    assert cal.latest(1e9, 1e9 + 0.4, 1e-8) == (1e9 + 0.25, 0, 0)
    assert cal.earliest(1e9 + 0.1, 1.0) == (1e9 + 0.5, 0, 0) and cal.latest(1e9 - 2, 1e9 + 0.4, 1.0) == (1e9 - 1, 0, 0)


# --- B: a gzip bomb never fills memory ---------------------------------------------------------------

def test_gzip_bomb_is_refused_from_its_trailer(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sim.workloads.errors, "MAX_TRACE_BYTES", 2**20)
    bomb = tmp_path / "bomb.swf.gz"
    bomb.write_bytes(gzip.compress(b"\n" * 2**22))  # 4 MiB of blank lines in 4 KiB
    assert main([str(bomb), "--policy", "easy", "--nodes", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bomb.swf.gz: more than 1,048,576 bytes of trace (decompressed" in err


def test_gzip_bomb_with_a_forged_trailer_is_refused_while_streaming(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sim.workloads.errors, "MAX_TRACE_BYTES", 2**20)
    bomb = tmp_path / "bomb.swf.gz"
    bomb.write_bytes(gzip.compress(b"\n" * 2**22) + gzip.compress(b""))  # the last member's size is 0
    with pytest.raises(InputError, match="more than 1,048,576 bytes of trace"):
        load_trace(bomb)


def test_cli_file_of_zeros_ends_at_the_line_limit(tmp_path: Path) -> None:
    bomb = tmp_path / "zeros.swf.gz"
    bomb.write_bytes(gzip.compress(bytes(2**22)))  # no line end at all
    assert_one_line(cli(str(bomb), "--policy", "easy", "--nodes", "8"),
                    "zeros.swf.gz:1: line longer than 1,048,576 characters")


def test_repeated_record_bomb_stops_at_its_second_line(tmp_path: Path) -> None:
    bomb = tmp_path / "same.swf.gz"
    bomb.write_bytes(gzip.compress(RECORD.format(1).encode() * 200_000))
    with pytest.raises(InputError, match=r"same\.swf\.gz:2: field 1 \(job number\): duplicate job number 1"):
        load_trace(bomb)


def test_a_large_trace_is_read_line_by_line(tmp_path: Path) -> None:
    text = "; comment line of a header that goes on for a while\n" * 200_000 + RECORD.format(1) + RECORD.format(2)
    trace = tmp_path / "long.swf.gz"
    trace.write_bytes(gzip.compress(text.encode()))
    tracemalloc.start()
    try:
        workload = load_trace(trace)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [job.id for job in workload.jobs] == [1, 2] and workload.lines == {1: 200_001, 2: 200_002}
    assert peak < len(text) / 4  # ~10 MB of text never held at once


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_streamed_reading_equals_reading_the_whole_text(tmp_path: Path, end: str) -> None:
    swf = "\ufeff; MaxNodes: 8" + end + end + RECORD.format(1).rstrip("\n") + end + RECORD.format(2).rstrip("\n")
    jobs = "job_id,submit_time,nodes,time_limit,actual_runtime,user" + end + '1,0,2,10,5,"a' + end + 'b"' + end
    for name, text, parse in (("t.swf.gz", swf, parse_swf), ("t.csv.gz", jobs, parse_jobs_csv)):
        path = tmp_path / name
        path.write_bytes(gzip.compress(text.encode("utf-8")))
        streamed, whole = load_trace(path), parse(text.lstrip("\ufeff"), str(path))
        assert (streamed.jobs, streamed.lines, streamed.default_nodes) == (whole.jobs, whole.lines, whole.default_nodes)


# --- B: rates that cannot be represented; no metric over an empty set --------------------------------

def test_synthetic_rates_beyond_the_time_bound_are_refused() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match=r"synthetic_hpc: arrival_rate must be ≥ jobs / 1e\+10 s = 1e-07 jobs"):
        synthetic_hpc(rng, jobs=1000, nodes=64, arrival_rate=1e-300)
    assert len(synthetic_hpc(rng, jobs=10, nodes=64, arrival_rate=1e-9).jobs) == 10  # 10 / 1e-9 = 1e10 s: the bound


def test_cli_refuses_a_trace_whose_jobs_are_all_dropped(tmp_path: Path) -> None:
    trace = tmp_path / "wide.csv"
    trace.write_text("job_submit_time,num_nodes,time_limit\n0,50,10\n5,60,10\n")
    assert_one_line(cli(str(trace), "--policy", "easy", "--nodes", "8", "--drop-oversized"),
                    "all 2 jobs are wider than the machine and were dropped", "nothing to simulate")


def test_no_metric_is_computed_over_an_empty_set() -> None:
    cluster = Cluster.nodes(4)
    with pytest.raises(InputError, match="the schedule has no jobs"):
        summarize(SimulationResult([], cluster, "easy", 0))
    with pytest.raises(InputError, match="the result has no workflows"):
        workflow_summary(SimulationResult([], Cluster.slotted(2, 1), "rmdcwf", 0))
    instant = rigid_job(0, 5.0, 2, 0.0)
    assert math.isnan(summarize(SimulationResult([JobRecord(instant, 5.0, 5.0)], cluster, "easy", 1))["util"])
    wf = make_workflow(0, 0, 0.0, 0.0, 10.0, [0.0], [[]], 2, 1)
    assert math.isnan(run(Workload(kind="workflow", workflows=(wf,)), Cluster.slotted(2, 1), rmdcwf()).summary["util"])
    with pytest.raises(InputError, match="warm-up of 1 workflows leaves none of the 1 to measure"):
        run(Workload(kind="workflow", workflows=(wf,), warmup=1), Cluster.slotted(2, 1), rmdcwf())
    with pytest.raises(InputError, match="the workload has no workflows: nothing to simulate"):
        run(Workload(kind="workflow"), Cluster.slotted(2, 1), rmdcwf())

