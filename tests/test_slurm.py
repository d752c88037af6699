"""The SLURM recipe on a real SLURM (``make test-slurm``; not part of ``make test``: it needs root and installs
the distribution's slurm-wlm and munge packages when missing). ``deploy/slurm/local-cluster.sh`` runs munged,
slurmctld and slurmd on loopback (one node, two CPUs); ``deploy/slurm/schedlab.sbatch`` is submitted with
sbatch as a user would, and the MLflow store is checked: every run recorded once, nothing RUNNING — also
after a job is scancel'ed mid-sweep and the same command resubmitted.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_sweeper import ENV, REPO, SMALL, runs, sqlite_uri

pytestmark = pytest.mark.slurm
SBATCH = REPO / "deploy" / "slurm" / "schedlab.sbatch"
LOCAL = REPO / "deploy" / "slurm" / "local-cluster.sh"
TINY = [*SMALL, "workload.jobs=200", "workload.arrival_rate=0.01", "hydra.launcher.progress=false"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A one-node SLURM on loopback; the environment its commands need (``SLURM_CONF``)."""
    if os.geteuid() != 0:
        pytest.fail("make test-slurm needs root (it installs SLURM and runs its daemons)")
    folder = tmp_path_factory.mktemp("slurm")
    started = subprocess.run([str(LOCAL), "start", str(folder), "2"], capture_output=True, text=True, timeout=900)
    assert started.returncode == 0, started.stdout + started.stderr
    env = {**ENV, "SLURM_CONF": str(folder / "slurm.conf"), "SCHEDLAB_PYTHON": str(REPO / ".venv" / "bin" / "python")}
    try:
        yield env
    finally:
        subprocess.run([str(LOCAL), "stop", str(folder)], timeout=120)


def submit(env: dict[str, str], store: Path, *args: str, sbatch_first: bool = False) -> str:
    """``sbatch schedlab.sbatch ARGS`` from the repository, recording into ``store`` (``sbatch_first``: the
    arguments up to the mode are sbatch's own); the job id."""
    options = list(args[:args.index("sweep")]) if sbatch_first else []
    args = args[len(options):]
    out = subprocess.run(["sbatch", "--parsable", f"--chdir={REPO}", f"--output={store}/%j.out",
                          f"--export=ALL,SCHEDLAB_STORE={store}", *options, str(SBATCH), *args],
                         env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    return out.strip().split(";")[0]


def state(env: dict[str, str], job: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", job, "-o"], env=env, capture_output=True, text=True).stdout
    return out.split("JobState=")[1].split()[0] if "JobState=" in out else "GONE"


def wait_for(env: dict[str, str], job: str, timeout: float = 600) -> str:
    """Wait until the job has ended; its final state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (now := state(env, job)) not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            return now
        time.sleep(2)
    raise AssertionError(f"job {job} still {state(env, job)} after {timeout} s")


def finished_once(store: Path, experiment: str) -> Counter[str]:
    """Run key → FINISHED runs of it; nothing may be RUNNING."""
    found = runs(sqlite_uri(store), experiment)
    assert not [r for r in found if r.info.status == "RUNNING"], Counter(r.info.status for r in found)
    return Counter(r.data.tags["schedlab.run_key"] for r in found if r.info.status == "FINISHED")


def test_a_sweep_submitted_with_sbatch_records_every_run_once(slurm: dict[str, str], tmp_path: Path) -> None:
    job = submit(slurm, tmp_path, "sweep", "-m", *TINY, "policy=easy,fcfs", "seed=range(0,3)",
                 "experiment_name=slurm-tiny", f"hydra.sweep.dir={tmp_path}/multirun")
    assert wait_for(slurm, job) == "COMPLETED", (tmp_path / f"{job}.out").read_text()[-4000:]
    log = (tmp_path / f"{job}.out").read_text()
    assert "connecting to Ray at" in log and "6 runs — 6 done, 0 failed, 0 skipped" in log
    assert "schedlab: stopping the Ray processes of job" in log
    keys = finished_once(tmp_path, "slurm-tiny")
    assert len(keys) == 6 and set(keys.values()) == {1}
    assert not subprocess.run(["pgrep", "-f", f"/tmp/ray-[^ ]*-{job}( |/|$)"], capture_output=True).stdout


def test_a_sweep_with_the_jobs_own_tracking_server(slurm: dict[str, str], tmp_path: Path) -> None:
    """SCHEDLAB_TRACKING=server: the job starts ``mlflow server`` on its head node over SCHEDLAB_STORE and the
    sweep records through it (every worker claims and writes its own runs); the server ends with the job."""
    job = submit({**slurm, "SCHEDLAB_TRACKING": "server"}, tmp_path, "sweep", "-m", *TINY, "policy=easy,fcfs",
                 "seed=0", "experiment_name=slurm-server", f"hydra.sweep.dir={tmp_path}/multirun")
    assert wait_for(slurm, job) == "COMPLETED", (tmp_path / f"{job}.out").read_text()[-4000:]
    log = (tmp_path / f"{job}.out").read_text()
    assert "recording to the MLflow server http://" in log and "2 runs — 2 done, 0 failed" in log
    keys = finished_once(tmp_path, "slurm-server")  # the server's backend store, read directly
    assert len(keys) == 2 and set(keys.values()) == {1}
    assert not subprocess.run(["pgrep", "-f", f"mlflow server .*{tmp_path}"], capture_output=True).stdout


def test_a_cancelled_job_resubmitted_loses_and_doubles_nothing(slurm: dict[str, str], tmp_path: Path) -> None:
    """scancel mid-sweep (the driver and its Ray die with the job); the same command resubmitted skips the
    finished runs, takes over the dead job's claims and runs the rest: every key FINISHED exactly once."""
    sweep = ["sweep", "-m", *SMALL, "workload.jobs=3000", "workload.arrival_rate=0.01", "policy=easy,conservative",
             "seed=range(0,12)", "hydra.launcher.progress=false", "experiment_name=slurm-cancel",
             f"hydra.sweep.dir={tmp_path}/multirun"]
    job = submit(slurm, tmp_path, *sweep)
    deadline = time.monotonic() + 600
    while len(finished_once_loose(tmp_path)) < 4:
        assert state(slurm, job) in ("PENDING", "RUNNING") and time.monotonic() < deadline, \
            (tmp_path / f"{job}.out").read_text()[-3000:]
        time.sleep(1)
    subprocess.run(["scancel", job], env=slurm, check=True)
    assert wait_for(slurm, job) == "CANCELLED"
    done = len(finished_once_loose(tmp_path))
    assert 4 <= done < 24
    assert not subprocess.run(["pgrep", "-f", f"/tmp/ray-[^ ]*-{job}( |/|$)"], capture_output=True).stdout

    again = submit(slurm, tmp_path, *sweep)
    assert wait_for(slurm, again) == "COMPLETED", (tmp_path / f"{again}.out").read_text()[-4000:]
    log = (tmp_path / f"{again}.out").read_text()
    assert f"24 runs — {24 - done} done, 0 failed, {done} skipped" in log
    keys = finished_once(tmp_path, "slurm-cancel")
    assert len(keys) == 24 and set(keys.values()) == {1}


def finished_once_loose(store: Path, experiment: str = "slurm-cancel") -> set[str]:
    """Run keys FINISHED so far while a job may still be running: read-only SQL (an MLflow client here could
    race the sweep creating the store's schema)."""
    try:
        with sqlite3.connect(f"file:{store / 'mlflow.db'}?mode=ro", uri=True, timeout=1) as db:
            rows = db.execute("SELECT t.value FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                              "JOIN experiments e ON e.experiment_id = r.experiment_id "
                              "WHERE r.status = 'FINISHED' AND t.key = 'schedlab.run_key' AND e.name = ?",
                              (experiment,)).fetchall()
    except sqlite3.Error:  # not created yet
        return set()
    return {key for (key,) in rows}


def test_a_job_at_its_time_limit_stops_its_sweep_cleanly_and_a_resubmission_finishes_it(
        slurm: dict[str, str], tmp_path: Path) -> None:
    """``--signal=B:INT@…`` before the time limit reaches the sweep as a Ctrl-C (the script forwards it):
    the sweep records what finished and stops; the same command resubmitted does the rest, once each."""
    sweep = ["sweep", "-m", *SMALL, "workload.jobs=5000", "workload.arrival_rate=0.01", "policy=easy,conservative",
             "seed=range(0,150)", "hydra.launcher.progress=false", "experiment_name=slurm-limit",
             f"hydra.sweep.dir={tmp_path}/multirun"]
    # a 5-minute job signalled 210 s before its end, i.e. ~90 s in (SLURM checks limits about once a minute):
    # the sweep (~300 s of runs here) is mid-way
    job = submit(slurm, tmp_path, "--time=5", "--signal=B:INT@210", *sweep, sbatch_first=True)
    wait_for(slurm, job)
    log = (tmp_path / f"{job}.out").read_text()
    assert "sweep interrupted" in log and "rerun the same command to resume" in log, log[-3000:]
    counted = int(log.split("sweep interrupted")[1].split(" done")[0].rsplit(" ", 1)[1])
    first = len(finished_once_loose(tmp_path, "slurm-limit"))  # + runs whose workers recorded them as it stopped
    assert 0 < counted <= first < 300
    again = submit(slurm, tmp_path, *sweep)
    assert wait_for(slurm, again) == "COMPLETED", (tmp_path / f"{again}.out").read_text()[-4000:]
    assert f"300 runs — {300 - first} done, 0 failed, {first} skipped" in (tmp_path / f"{again}.out").read_text()
    keys = finished_once(tmp_path, "slurm-limit")
    assert len(keys) == 300 and set(keys.values()) == {1}
