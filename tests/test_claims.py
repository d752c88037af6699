"""Nothing doubled: runs are claimed before they run (``sweeps/record.py``), so whatever happens — two
identical sweeps at once, on a new or an existing store, SQLite or a tracking server; workers killed
right after writing their record; a dead sweep's claims — every run key ends FINISHED exactly once and
no run is left RUNNING. Real processes, real Ray, real MLflow.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from hydra import compose
from hydra.core.hydra_config import HydraConfig
from mlflow.tracking import MlflowClient

from sweeps.planner import Planner, Run
from sweeps.record import CLAIM_TAGS, SWEEP_TAG, RunResult
from tests.test_identity import EXPERIMENT, conf, trace_dir, trace_runs  # noqa: F401 (fixtures)
from tests.test_sweeper import ENV, RUN, SMALL, descendants, kill_tree, mlflow_server, runs, sqlite_uri  # noqa: F401

TINY = [*SMALL, "workload.jobs=200", "workload.arrival_rate=0.01", "hydra.launcher.progress=false",
        "experiment_name=claims"]


def start(cwd: Path, *overrides: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(RUN), "-m", *TINY, *overrides], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(*procs: subprocess.Popen) -> list[str]:
    outs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-4000:]
        outs.append(out)
    return outs


def assert_each_key_finished_once(uri: str, keys: int) -> None:
    found = runs(uri, "claims")
    statuses = Counter(r.info.status for r in found)
    assert statuses["RUNNING"] == 0, statuses
    finished = Counter(r.data.tags["schedlab.run_key"] for r in found if r.info.status == "FINISHED")
    assert len(finished) == keys and set(finished.values()) == {1}, finished


@pytest.mark.slow  # make test-slow: a long fault case (issue 37: the default suite under 10 min)
def test_two_identical_sweeps_at_once_run_each_key_once(tmp_path: Path) -> None:
    """On a new SQLite store (its schema created under a lock), then again on the existing one."""
    outs = finish(start(tmp_path, "policy=easy,fcfs", "seed=range(0,4)"),
                  start(tmp_path, "policy=easy,fcfs", "seed=range(0,4)"))
    assert_each_key_finished_once(sqlite_uri(tmp_path), 8)
    assert sum(int(out.split(" done, ")[0].rsplit(" ", 1)[1]) for out in outs) == 8  # 8 runs done in all
    outs = finish(start(tmp_path, "policy=easy,fcfs", "seed=range(0,10)"),
                  start(tmp_path, "policy=easy,fcfs", "seed=range(0,10)"))
    assert_each_key_finished_once(sqlite_uri(tmp_path), 20)
    assert sum(int(out.split(" done, ")[0].rsplit(" ", 1)[1]) for out in outs) == 12


def test_two_sweeps_at_once_through_a_tracking_server(mlflow_server: str, tmp_path: Path) -> None:  # noqa: F811
    server = ["tracking=server", f"tracking.uri={mlflow_server}"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()  # two users, two launch folders, one server
    finish(start(tmp_path / "a", "policy=easy,fcfs", "seed=range(0,4)", *server),
           start(tmp_path / "b", "policy=easy,fcfs", "seed=range(0,4)", *server))
    assert_each_key_finished_once(mlflow_server, 8)


@pytest.mark.slow  # make test-slow: a long fault case (issue 37: the default suite under 10 min)
def test_workers_killed_right_after_recording_leave_one_run_per_key(tmp_path: Path) -> None:
    """Each time a run turns FINISHED in the store, every worker still running a task is SIGKILLed — the
    one that just wrote its record among them, before the driver heard of it: Ray retries it, the retry
    finds its claim already FINISHED and leaves it."""
    proc = start(tmp_path, "policy=conservative", "seed=range(0,6)", "workload.jobs=2000", "workload.arrival_rate=0.05",
                 "hydra.launcher.max_retries=20")  # a run can be killed mid-way by every earlier run's kill
    db, seen, kills = tmp_path / "mlflow.db", 0, 0
    deadline = time.monotonic() + 240
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            finished = count_finished(db)
            if finished > seen:
                seen = finished
                for pid, cmdline in descendants(proc.pid).items():
                    if cmdline.startswith("ray::_execute"):
                        os.kill(pid, signal.SIGKILL)
                        kills += 1
            time.sleep(0.01)
        out, _ = proc.communicate(timeout=120)
    finally:
        kill_tree(proc.pid)
    assert proc.returncode == 0, out[-4000:]
    assert kills >= 2 and "6 done, 0 failed" in out
    assert_each_key_finished_once(sqlite_uri(tmp_path), 6)


def count_finished(db: Path) -> int:
    import sqlite3

    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
            return con.execute("SELECT COUNT(*) FROM runs WHERE status = 'FINISHED'").fetchone()[0]
    except sqlite3.Error:
        return 0


def planned(overrides: list[str]) -> tuple[RunResult | None, Planner]:
    """A new sweep's planner with one run planned (``overrides``, its ``runs[0]``): its decision and the planner."""
    tracker = Planner(summary=False)
    cfg = compose("config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    run = Run.of(cfg)
    tracker.plan(cfg, [run])
    return run.result, tracker


def test_a_worker_claims_its_run_as_it_starts_and_a_retry_takes_the_claim_over(
        conf: None, trace_dir: Path) -> None:  # noqa: F811
    """With a local Ray the workers claim (RunRecord.start): a Ray retry of the run takes over its own sweep's
    claim (one MLflow run), another sweep's worker finds it claimed, and a claim never recorded is marked
    KILLED when the sweep ends, so the next sweep runs it."""
    uri = sqlite_uri(trace_dir)
    [overrides] = trace_runs(trace_dir, policies=("easy",))
    decision, tracker = planned(overrides)
    assert decision is None and tracker.store is not None
    tracker.claim_on_workers(local=True)
    record = tracker.recorder(tracker.runs[0])
    assert record is not None and record.claim is None  # not claimed on the driver
    first, retry = pickle.loads(pickle.dumps(record)), pickle.loads(pickle.dumps(record))  # as workers get it
    assert first.start() is None and first.claim is not None
    assert retry.start() is None and retry.claim == first.claim
    key = tracker.runs[0].key
    assert [r.info.run_id for r in tracker.store.runs_by_key(key)[key]] == [first.claim.run_id]
    assert MlflowClient(uri).get_run(first.claim.run_id).data.tags[CLAIM_TAGS[0]] == tracker.sweep_id

    _, other = planned(overrides)  # a second sweep, its decision taken before the claim was seen
    other.claim_on_workers(local=True)
    skipped = other.recorder(other.runs[0]).start()
    assert skipped is not None and skipped.elsewhere == tracker.sweep_id
    other.close()

    tracker.close()  # the sweep ended before the run was recorded
    assert MlflowClient(uri).get_run(first.claim.run_id).info.status == "KILLED"
    decision, again = planned(overrides)
    assert decision is None  # the next sweep runs it
    again.close()


def test_a_claim_elsewhere_is_skipped_while_its_sweep_beats_and_taken_over_after(
        conf: None, trace_dir: Path) -> None:  # noqa: F811
    """A RUNNING run claimed by a sweep on another host: skipped while that sweep's heartbeat is fresh,
    marked KILLED and run again once it is stale."""
    uri = sqlite_uri(trace_dir)
    [overrides] = trace_runs(trace_dir, policies=("easy",))

    _, tracker = planned(overrides)  # opens the store; claim as the other host would
    assert tracker.store is not None
    other = dict(zip(CLAIM_TAGS, ("far-sweep", "elsewhere", "1", "1"), strict=True))
    run = tracker.store.claim({**tracker.runs[0].tags, **other}, "easy")
    tracker.store.set_sweep_tag(SWEEP_TAG + "far-sweep", json.dumps({"beat": time.time()}))
    decision, tracker = planned(overrides)
    assert str(decision) == "running in another sweep: far-sweep" and decision.elsewhere == "far-sweep"
    assert "1 not run here: running in another sweep (far-sweep)" in tracker.notes()[0]
    tracker.store.set_sweep_tag(SWEEP_TAG + "far-sweep", json.dumps({"beat": time.time() - 3600}))
    decision, tracker = planned(overrides)
    assert decision is None and len(tracker.killed) == 1
    assert MlflowClient(uri).get_run(run.run_id).info.status == "KILLED"
    assert SWEEP_TAG + "far-sweep" not in tracker.store.sweeps()  # the stale heartbeat is cleaned up


def test_many_processes_opening_a_new_store_at_once(tmp_path: Path) -> None:
    """The schema of a new SQLite store is created once, under a file lock (before: 'table _alembic_tmp_tags
    already exists' and a broken store)."""
    script = textwrap.dedent(f"""
        from sweeps.tracking import MlflowStore
        MlflowStore("sqlite:///{tmp_path}/mlflow.db", "claims")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(4)]
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out[-3000:]
    assert [e.name for e in MlflowClient(sqlite_uri(tmp_path)).search_experiments()] == ["claims"]
