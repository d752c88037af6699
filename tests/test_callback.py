"""sweeps/callback.py: every way of running records each run exactly once; what cannot be recorded is refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.test_sweeper import ENV, RUN, SYNTH, runs, sqlite_uri, sweep


def single(cwd: Path, *overrides: str, multirun: bool = False) -> subprocess.CompletedProcess:
    """``sweeps/run.py`` without the Ray options (``multirun``: with ``-m``)."""
    flag = ["-m"] if multirun else []
    return subprocess.run([sys.executable, str(RUN), *flag, "cluster=hpc16", *overrides], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=120)


def test_serial_launcher_and_single_run_record_once(tmp_path: Path) -> None:
    basic = single(tmp_path, *SYNTH, "hydra/launcher=serial", "policy=easy", "seed=1,2", multirun=True)
    assert basic.returncode == 0, basic.stderr
    assert sorted(r.data.params["seed"] for r in runs(sqlite_uri(tmp_path))) == ["1", "2"]
    first = single(tmp_path, *SYNTH, "seed=3")
    assert first.returncode == 0 and "MLflow run" in first.stdout
    again = single(tmp_path, *SYNTH, "seed=3")
    assert again.returncode == 0 and "already recorded" in again.stdout
    assert sorted(r.data.params["seed"] for r in runs(sqlite_uri(tmp_path))) == ["1", "2", "3"]


def test_unrecordable_launcher_is_refused_before_anything_runs(tmp_path: Path) -> None:
    proc = sweep(tmp_path, *SYNTH, "hydra.launcher._target_=some.other.Launcher", "seed=1", check=False)
    assert proc.returncode != 0
    assert "cannot record runs" in proc.stderr and "hydra/launcher=ray" in proc.stderr
    assert "hydra/launcher=serial" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()
    basic = single(tmp_path, *SYNTH, "hydra/launcher=basic", "seed=1", multirun=True)  # would run all, record none
    assert basic.returncode != 0 and "cannot record runs of hydra/launcher=basic" in basic.stderr
    assert "serial: one run at a time in this process" in basic.stderr and "Traceback" not in basic.stderr


def test_hydras_basic_sweeper_on_the_ray_launcher_skips_recorded_runs(tmp_path: Path) -> None:
    """The default sweeper is Hydra's own: on schedlab's Ray launcher a rerun skips what is recorded (here by
    the serial launcher: the skip rule is the launchers' one) and runs only what a wider sweep adds; once the
    sweep has ended its store's file alone holds the run a Ray worker wrote (a copy of it, without the
    write-ahead log, is a whole store)."""
    first = single(tmp_path, *SYNTH, "hydra/sweeper=basic", "hydra/launcher=serial", "policy=easy", "seed=1,2",
                   multirun=True)
    assert first.returncode == 0 and "2 done, 0 failed, 0 skipped" in first.stdout, first.stderr[-3000:]
    again = sweep(tmp_path, *SYNTH, "hydra/sweeper=basic", "hydra/launcher=ray", "policy=easy", "seed=1,2,3",
                  "hydra.sweeper.max_batch_size=2")
    assert "nothing to run: all 2 runs already recorded" in again.stdout  # the first batch of two
    assert "1 done, 0 failed, 0 skipped" in again.stdout and again.stdout.count("starting a local Ray") == 1
    (tmp_path / "copy").mkdir()
    shutil.copy(tmp_path / "mlflow.db", tmp_path / "copy" / "mlflow.db")
    for store in (tmp_path, tmp_path / "copy"):
        found = runs(sqlite_uri(store))
        assert sorted((r.data.params["seed"], r.info.status) for r in found) == [
            ("1", "FINISHED"), ("2", "FINISHED"), ("3", "FINISHED")]


def test_single_run_bad_value_is_one_message(tmp_path: Path) -> None:
    for bad in ("seed=abc", "workload.arrival_rate=-1"):
        proc = single(tmp_path, bad)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "invalid configuration, nothing was run" in proc.stderr


def test_saved_stream_artifact_replays_to_the_recorded_metrics(tmp_path: Path) -> None:
    """``workload.save_stream=true`` logs the drawn stream; replaying it gives the run's own numbers."""
    from sim.core import Cluster
    from sim.policies import policy_from_conf
    from sim.run import run
    from sim.workflows.files import read_stream

    proc = single(tmp_path, "cluster=rmdcwf", "workload=ligo", "policy=rmdcwf", "workload.jobs=12",
                  "workload.warmup=0", "workload.arrival_rate=0.02", "workload.save_stream=true", "seed=4")
    assert proc.returncode == 0, proc.stderr
    [recorded] = runs(sqlite_uri(tmp_path))
    [saved] = tmp_path.glob(f"mlartifacts/*/{recorded.info.run_id}/artifacts/workflow_stream.json")
    workload, m, c_r = read_stream(saved)
    assert (m, c_r, len(workload.workflows)) == (50, 2, 12)
    replay = run(workload, Cluster.slotted(m, c_r), policy_from_conf("rmdcwf"))
    for name in ("late/proportion", "turnaround/mean", "util", "load/offered"):
        assert replay.summary[name] == recorded.data.metrics[name], name


def test_zero_replications_is_one_message_before_anything_runs(tmp_path: Path) -> None:
    proc = single(tmp_path, "replications=0", multirun=True)  # was a StopIteration traceback
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "replications must be a positive integer (seeds per cell), got 0; nothing was run" in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()


def test_recorded_in_process_runs_are_not_simulated_again(tmp_path: Path) -> None:
    """A single run or a serial-launcher job the planner skips never reaches the simulator."""
    from tests.test_sweeper import REPO

    strict = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); import sweeps.task as task\n"
              "def refuse(cfg): raise AssertionError('a recorded run was simulated again')\n"
              "task.run_one = refuse; sys.argv[0] = sys.argv.pop(1)\n"
              "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    assert single(tmp_path, *SYNTH, "seed=3").returncode == 0
    assert single(tmp_path, *SYNTH, "hydra/launcher=serial", "seed=1,2", multirun=True).returncode == 0
    for multirun, seeds in ((False, "seed=3"), (True, "seed=1,2,2")):
        flag = ["-m", "hydra/launcher=serial"] if multirun else []
        args = [sys.executable, "-c", strict, str(REPO), str(RUN), *flag, "cluster=hpc16", *SYNTH, seeds]
        proc = subprocess.run(args, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "simulated again" not in proc.stderr, proc.stderr
        assert "already recorded" in proc.stdout
    recorded = runs(sqlite_uri(tmp_path))  # the demo sweeps two policies: seeds 1, 2 twice, seed 3 once
    assert sorted(r.data.params["seed"] for r in recorded) == ["1", "1", "2", "2", "3"]
    assert {r.info.status for r in recorded} == {"FINISHED"}
    assert len({r.data.tags["schedlab.run_key"] for r in recorded}) == 5
