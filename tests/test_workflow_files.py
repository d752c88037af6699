"""Workflow-stream JSON files, WfFormat instances and the folder stream: round trips and bad input."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from sim.core import InputError
from sim.workflows.files import read_stream, write_stream
from sim.workflows.stream import workflow_stream
from sim.workflows.wfformat import read_wfformat, wfformat_stream
from sweeps.specs import SlottedCluster, WfFormatFolder, WorkflowFile, WorkflowStream

STREAM = {"jobs": 40, "arrival_rate": 1 / 22, "s_max": 10_000, "em_max": 5.0, "machines": 4, "slots": 2}


def _job(**overrides):
    job = {"id": 0, "arrival": 10.0, "earliest_start": 20.0, "deadline": 100.0,
           "tasks": [{"id": 0, "runtime": 5.0, "parents": []}, {"id": 1, "runtime": 3.0, "parents": [0]}]}
    return {**job, **overrides}


def _write(tmp_path, jobs, m=4, c_r=2):
    path = tmp_path / "stream.json"
    path.write_text(json.dumps({"m": m, "c_r": c_r, "jobs": jobs}))
    return path


# --- stream file -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["cybershake", "ligo", "genome"])
def test_round_trip_gives_equal_workflows(tmp_path, kind):
    w = workflow_stream(np.random.default_rng(7), kind, warmup=4, **STREAM)
    path = write_stream(tmp_path / "s.json", w.workflows, 4, 2)
    back, m, c_r = read_stream(path, warmup=4)
    assert (m, c_r) == (4, 2) and back.kind == "workflow" and back.warmup == 4
    assert back.workflows == tuple(w.workflows) and back.jobs == w.jobs == []
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # the temporary file is gone


def test_file_layout_has_local_task_ids(tmp_path):
    w = workflow_stream(np.random.default_rng(1), "ligo", **{**STREAM, "jobs": 3})
    data = json.loads(write_stream(tmp_path / "s.json", w.workflows, 4, 2).read_text())
    assert set(data) == {"m", "c_r", "jobs"} and [j["id"] for j in data["jobs"]] == [0, 1, 2]
    for job in data["jobs"]:
        assert [t["id"] for t in job["tasks"]] == list(range(len(job["tasks"])))
        assert all(0 <= p < t["id"] for t in job["tasks"] for p in t["parents"])


def test_read_recomputes_set_r_on_the_given_system(tmp_path):
    path = _write(tmp_path, [_job(tasks=[{"id": 0, "runtime": 5.0, "parents": []},
                                         {"id": 1, "runtime": 3.0, "parents": []}])])
    assert read_stream(path)[0].workflows[0].set_r == 5.0  # 4 × 2 slots: both at once
    assert read_stream(path, machines=1, slots=1)[0].workflows[0].set_r == 8.0


def test_write_is_atomic_when_the_rename_fails(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    path.write_text("old")
    w = workflow_stream(np.random.default_rng(1), "ligo", **{**STREAM, "jobs": 2})

    def fail(*_):
        raise OSError("disk full")

    monkeypatch.setattr("sim.workflows.files.os.replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_stream(path, w.workflows, 4, 2)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["s.json"]


@pytest.mark.parametrize(("job", "message"), [
    (_job(tasks=[{"id": 0, "runtime": 1.0, "parents": [1]}, {"id": 1, "runtime": 1.0, "parents": [0]}]),
     r"job 0: the task graph has a cycle \(through task 0\)"),
    (_job(tasks=[{"id": 0, "runtime": 1.0, "parents": [7]}]), r"job 0: task 0: unknown parent 7"),
    (_job(tasks=[{"id": 0, "runtime": -1.0, "parents": []}]),
     r"job 0: task 0: runtime must be a non-negative number of seconds, got -1\.0"),
    (_job(tasks=[{"id": 0, "runtime": "5", "parents": []}]),
     r"job 0: task 0: runtime must be a non-negative number of seconds, got '5'"),
    (_job(deadline=15.0), r"job 0: deadline 15\.0 is before its earliest_start 20\.0"),
    (_job(earliest_start=5.0), r"job 0: earliest_start 5\.0 is before its arrival 10\.0"),
    (_job(arrival="soon"), r"job 0: arrival must be a non-negative number of seconds, got 'soon'"),
    (_job(id=3), r"job 3: id must be 0"),
    (_job(tasks=[{"id": 1, "runtime": 1.0, "parents": []}]), r"job 0: task at position 0 has id 1"),
    (_job(tasks=[]), r"job 0: 'tasks' must be a non-empty list"),
])
def test_bad_stream_file_names_file_job_and_task(tmp_path, job, message):
    path = _write(tmp_path, [job])
    with pytest.raises(InputError, match=rf"^{path!s}: {message}"):
        read_stream(path)


def test_bad_header_and_malformed_json(tmp_path):
    with pytest.raises(InputError, match=r"'m' must be a positive integer, got 0"):
        read_stream(_write(tmp_path, [_job()], m=0))
    with pytest.raises(InputError, match=r"'c_r' must be a positive integer, got 0"):
        read_stream(_write(tmp_path, [_job()], c_r=0))
    path = tmp_path / "broken.json"
    path.write_text('{"m": 4,\n "c_r": 2,\n "jobs": [}')
    with pytest.raises(InputError, match=rf"^{path}: line 3 column 11: malformed JSON"):
        read_stream(path)


def test_jobs_out_of_arrival_order_are_refused(tmp_path):
    path = _write(tmp_path, [_job(), _job(id=1, arrival=5.0, earliest_start=5.0)])
    with pytest.raises(InputError, match=r"job 1: arrival 5\.0 is before the previous job's \(10\.0\)"):
        read_stream(path)


# --- specs: save, replay, mismatched cluster ---------------------------------------------------------

def test_saved_stream_replays_through_workflow_file(tmp_path):
    spec = WorkflowStream(type="genome", jobs=12, warmup=2, save_stream=True)
    cluster = SlottedCluster(m=6, c_r=2).build()
    w = spec.build(np.random.default_rng(3), cluster)
    path = spec.stream_file(w, cluster, tmp_path / "stream.json")
    replay = WorkflowFile(path=str(path), warmup=2).build(np.random.default_rng(99), cluster)
    assert replay.workflows == tuple(w.workflows) and replay.warmup == w.warmup


def test_workflow_file_refuses_another_cluster(tmp_path):
    path = _write(tmp_path, [_job()], m=4, c_r=2)
    with pytest.raises(InputError, match=r"drawn for m=4, c_r=2 but the cluster is m=50, c_r=2; set cluster\.m=4"):
        WorkflowFile(path=str(path)).build(np.random.default_rng(0), SlottedCluster().build())
    with pytest.raises(InputError, match="workflow-stream file not found"):
        WorkflowFile(path=str(tmp_path / "missing.json"))


# --- WfFormat ----------------------------------------------------------------------------------------

def _instance(version: str, runtimes=(4.0, 2.0, 3.0), drop_runtime: bool = False) -> dict:
    """A diamond-less 3-task chain-and-fan: a → b, a → c (c declared only via a's children)."""
    names = ["a", "b", "c"]
    ids = ["ID01", "ID02", "ID03"]
    if version == "1.5":
        spec = [{"name": names[0], "id": ids[0], "parents": [], "children": [ids[1], ids[2]]},
                {"name": names[1], "id": ids[1], "parents": [ids[0]], "children": []},
                {"name": names[2], "id": ids[2], "parents": [], "children": []}]
        runs = [{"id": i, "runtimeInSeconds": e} for i, e in zip(ids, runtimes, strict=True)]
        if drop_runtime:
            runs = runs[:2]
        return {"name": "w", "schemaVersion": "1.5",
                "workflow": {"specification": {"tasks": spec}, "execution": {"tasks": runs, "makespanInSeconds": 9}}}
    key = "runtime" if version == "1.3" else "runtimeInSeconds"
    ref = names if version == "1.3" else ids  # 1.3 refers to tasks by name, 1.4 by id
    tasks = [{"name": names[0], "id": ids[0], key: runtimes[0], "parents": [], "children": [ref[1], ref[2]]},
             {"name": names[1], "id": ids[1], key: runtimes[1], "parents": [ref[0]], "children": []},
             {"name": names[2], "id": ids[2], key: runtimes[2], "parents": [], "children": []}]
    if drop_runtime:
        del tasks[2][key]
    return {"name": "w", "schemaVersion": version, "workflow": {"tasks": tasks}}


@pytest.mark.parametrize("version", ["1.3", "1.4", "1.5"])
def test_wfformat_versions_read_the_same_dag(tmp_path, version):
    path = tmp_path / f"w{version}.json"
    path.write_text(json.dumps(_instance(version)))
    dag = read_wfformat(path)
    assert dag.runtimes == (4.0, 2.0, 3.0) and dag.parents == ((), (0,), (0,)) and dag.names == ("a", "b", "c")


@pytest.mark.parametrize("version", ["1.3", "1.4", "1.5"])
def test_wfformat_missing_runtime_names_file_and_task(tmp_path, version):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(_instance(version, drop_runtime=True)))
    with pytest.raises(InputError, match=rf"^{path}: task 'ID03' has no runtime"):
        read_wfformat(path)


def test_wfformat_bad_input(tmp_path):
    path = tmp_path / "w.json"
    bad = _instance("1.4")
    bad["workflow"]["tasks"][1]["parents"] = ["ID09"]
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"task 'ID02': unknown task 'ID09' in parents"):
        read_wfformat(path)
    cyc = _instance("1.4")
    cyc["workflow"]["tasks"][0]["parents"] = ["ID02"]
    path.write_text(json.dumps(cyc))
    with pytest.raises(InputError, match=rf"^{path}: the task graph has a cycle"):
        read_wfformat(path)
    path.write_text(json.dumps(_instance("1.4", runtimes=(1.0, -2.0, 1.0))))
    with pytest.raises(InputError, match=r"task 'ID02': runtime must be a non-negative number"):
        read_wfformat(path)
    path.write_text('{"workflow": {"tasks": [')
    with pytest.raises(InputError, match=rf"^{path}: line 1 column 25: malformed JSON"):
        read_wfformat(path)
    path.write_text('{"name": "x"}')
    with pytest.raises(InputError, match="not a WfFormat instance"):
        read_wfformat(path)


def test_folder_stream_draws_every_instance_uniformly(tmp_path):
    for i, version in enumerate(["1.3", "1.4", "1.5"]):
        (tmp_path / f"w{i}.json").write_text(json.dumps(_instance(version, runtimes=(10.0 * (i + 1), 1.0, 1.0))))
    w = wfformat_stream(np.random.default_rng(0), tmp_path, **{**STREAM, "jobs": 900})
    counts = Counter(wf.tasks[0].runtime for wf in w.workflows)
    assert set(counts) == {10.0, 20.0, 30.0} and all(abs(c - 300) < 60 for c in counts.values())  # ≈ 4 σ
    assert all(wf.set_r == pytest.approx(wf.tasks[0].runtime + 1.0) for wf in w.workflows)
    again = WfFormatFolder(path=str(tmp_path), **{k: v for k, v in STREAM.items() if k not in ("machines", "slots")},
                           warmup=0).build(np.random.default_rng(0), SlottedCluster(m=4, c_r=2).build())
    assert tuple(again.workflows)[:40] == tuple(wfformat_stream(np.random.default_rng(0), tmp_path, **STREAM).workflows)


def test_folder_without_instances(tmp_path):
    with pytest.raises(InputError, match=r"no WfFormat instance files \(\*\.json\)"):
        wfformat_stream(np.random.default_rng(0), tmp_path, **STREAM)
    with pytest.raises(InputError, match="WfFormat folder not found"):
        WfFormatFolder(path=str(tmp_path / "nope"))
