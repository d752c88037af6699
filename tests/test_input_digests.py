"""Nothing stale: the digest of an input is the digest of what the run read, and a bad trace stops the sweep
on the driver. The tracker is driven in this process as Hydra's basic launcher drives it; ``task.run_one``
is the worker's code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose
from hydra.core.hydra_config import HydraConfig
from mlflow.tracking import MlflowClient

from sim.core import InputError
from sweeps import specs, task
from sweeps._hydra import task_config
from sweeps.planner import Planner, Run
from sweeps.record import RunReport
from tests.test_identity import EXPERIMENT, TRACE, conf, drive, trace_dir, trace_runs  # noqa: F401
from tests.test_sweeper import ENV, RUN, runs, sqlite_uri

EDITED = TRACE.replace("1 0 -1 100 4", "1 0 -1 900 4")  # job 1 runs 900 s instead of 100


def test_a_trace_edited_after_planning_is_recorded_as_read_and_rerun_after(conf: None, trace_dir: Path) -> None:  # noqa: F811
    """Planned with one trace, read with another (edited while the sweep ran): the record holds the digest
    of what was read and says what was planned; the sweep names the file; restored, the runs rerun."""
    trace = trace_dir / "traces" / "x.swf"
    tracker = Planner(summary=False)
    planned = []
    for index, overrides in enumerate(trace_runs(trace_dir)):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        planned.append(Run.of(cfg, index))
    tracker.plan(cfg, planned)
    assert [run.result for run in planned] == [None, None]
    trace.write_text(EDITED)  # the worker reads the file after the driver planned with it
    for run in planned:
        assert tracker.claim(run) is None
        tracker.ended(run, RunReport("FINISHED", task.run_one(run.plain), node_id="test", end_time=1.0))
    tracker.close()
    assert tracker.notes()[0].startswith("input file traces/x.swf changed during the sweep: 2 run(s) read other")
    found = runs(sqlite_uri(trace_dir), EXPERIMENT)
    for run in found:
        tags = run.data.tags
        assert tags["schedlab.inputs_changed"] == "traces/x.swf"
        assert tags["schedlab.inputs"] != tags["schedlab.inputs_planned"]
    trace.write_text(TRACE)  # restored: the records are of the edited trace, so they rerun
    decisions, tracker = drive(trace_runs(trace_dir))
    assert decisions == [None, None] and tracker.notes() == ["2 reran: input file changed: traces/x.swf"]
    decisions, _ = drive(trace_runs(trace_dir))
    assert all(d and str(d).startswith("finished in MLflow run") for d in decisions)


def test_a_file_that_changes_while_it_is_read_fails_the_run(conf: None, trace_dir: Path,  # noqa: F811
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    trace = trace_dir / "traces" / "x.swf"
    read = specs.TraceFile.build

    def read_then_edit(self: specs.TraceFile, *args: object) -> object:
        workload = read(self, *args)
        trace.write_text(EDITED)  # someone saves the file just after it was parsed
        return workload

    monkeypatch.setattr(specs.TraceFile, "build", read_then_edit)
    cfg = compose("config", overrides=trace_runs(trace_dir)[0], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with pytest.raises(InputError, match=r"input file traces/x\.swf changed while this run read it; rerun"):
        task.run_one(task_config(cfg))


def test_a_trace_with_a_bad_line_stops_the_sweep_before_ray_starts(tmp_path: Path) -> None:
    (tmp_path / "bad.swf").write_text(TRACE + "4 30 -1 nan 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n")
    proc = subprocess.run([sys.executable, str(RUN), "-m", "workload=swf", "workload.path=bad.swf",
                           "cluster=from_trace", "policy=easy,fcfs"], cwd=tmp_path, env=ENV, capture_output=True,
                          text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out
    assert "invalid configuration, nothing was run" in out and "bad.swf:5" in out
    assert "starting a local Ray" not in out
    assert not [r for r in runs(sqlite_uri(tmp_path)) if r.info.status != "KILLED"]


def test_an_unchanged_trace_records_its_planned_digest_only(conf: None, trace_dir: Path) -> None:  # noqa: F811
    drive(trace_runs(trace_dir, policies=("easy",)))
    [run] = runs(sqlite_uri(trace_dir), EXPERIMENT)
    assert "schedlab.inputs_planned" not in run.data.tags
    assert MlflowClient(sqlite_uri(trace_dir)).get_run(run.info.run_id).info.status == "FINISHED"
