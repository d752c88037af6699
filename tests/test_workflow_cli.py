"""``python -m sim STREAM.json --policy rmdcwf …``: replay of a saved workflow stream."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from sim.__main__ import main
from sim.core import Cluster
from sim.policies import policy_from_conf
from sim.run import run
from sim.workflows.files import write_stream
from sweeps.specs import WorkflowStream


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    cluster = Cluster.slotted(4, 2)
    workload = WorkflowStream(type="ligo", arrival_rate=1 / 600, jobs=12, warmup=2).build(
        np.random.default_rng(3), cluster)
    path = tmp_path_factory.mktemp("stream") / "ligo.json"
    write_stream(path, workload.workflows, 4, 2)
    return path, workload


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_replay_writes_the_task_and_workflow_tables_of_the_sweep_run(stream, tmp_path: Path, capsys) -> None:
    path, workload = stream
    tasks, jobs = tmp_path / "tasks.csv", tmp_path / "jobs.csv"
    code = main([str(path), "--policy", "rmdcwf", "--laxity-distribution", "ed", "--tsp", "tsp2", "--warmup", "2",
                 "--out", str(tasks), "--jobs-out", str(jobs)])
    assert code == 0
    out = capsys.readouterr().out
    direct = run(workload, Cluster.slotted(4, 2), policy_from_conf("rmdcwf", laxity_distribution="ed", tsp="tsp2"))
    assert f"  late/proportion  {direct.summary['late/proportion']:.6g}" in out  # same numbers as the sweep path
    assert f"  turnaround/mean  {direct.summary['turnaround/mean']:.6g}" in out
    task_rows = rows(tasks)
    assert list(task_rows[0]) == ["job_id", "task_id", "resource", "start", "end", "sub_deadline"]
    assert len(task_rows) == sum(len(wf.tasks) for wf in workload.workflows)
    assert all(r["sub_deadline"] != "" for r in task_rows)
    job_rows = rows(jobs)
    assert list(job_rows[0]) == ["job_id", "arrival", "earliest_start", "deadline", "completion", "late"]
    for r in job_rows:
        assert (r["late"] == "true") == (float(r["completion"]) > float(r["deadline"]))
        ends = [float(t["end"]) for t in task_rows if t["job_id"] == r["job_id"]]
        assert max(ends) == float(r["completion"])


def test_fifo_has_no_sub_deadlines(stream, tmp_path: Path) -> None:
    path, _ = stream
    assert main([str(path), "--policy", "fifo_workflow", "--out", str(tmp_path / "t.csv")]) == 0
    assert {r["sub_deadline"] for r in rows(tmp_path / "t.csv")} == {""}


@pytest.mark.parametrize(("args", "message"), [
    (["--policy", "fifo_workflow", "--tsp", "tsp2"], "fifo_workflow does not accept option 'tsp' (it takes no"),
    (["--policy", "easy"], "policy 'easy' schedules hpc or multires workloads, not workflow"),
    (["--policy", "rmdcwf", "--nodes", "4"], "--nodes: a workflow stream runs on the m × c_r cluster"),
    (["--policy", "rmdcwf", "--jobs-out", "/missing/dir/j.csv"], "folder /missing/dir does not exist"),
])
def test_bad_options_are_one_line(stream, capsys, args: list[str], message: str) -> None:
    path, _ = stream
    assert main([str(path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_stream_options_on_a_job_trace_are_refused(tmp_path: Path, capsys) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxNodes: 4\n1 0 0 10 1 -1 -1 1 10 -1 1 1 1 1 1 1 -1 -1\n")
    assert main([str(trace), "--policy", "easy", "--laxity", "tl"]) == 2
    assert "--laxity: only for workflow streams" in capsys.readouterr().err


def test_a_broken_stream_file_names_file_job_and_task(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"m": 2, "c_r": 1, "jobs": [{"id": 0, "arrival": 0, "earliest_start": 0,
                                                           "deadline": 10, "tasks": [
                                                               {"id": 0, "runtime": 1, "parents": [1]},
                                                               {"id": 1, "runtime": 1, "parents": [0]}]}]}))
    assert main([str(bad), "--policy", "rmdcwf"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "job 0" in err and "cycle" in err
