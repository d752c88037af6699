"""Sweeps end to end through ``sweeps/run.py -m`` (Hydra's basic sweeper, schedlab's Ray launcher): real Hydra,
Ray, MLflow, no mocks.

Each sweep runs ``sweeps/run.py`` in a subprocess from ``tmp_path`` (its own SQLite store there),
on small runs so the whole file stays around two minutes on two cores.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO, built_once

RUN = REPO / "sweeps" / "run.py"
SMALL = ["cluster=hpc16", "hydra.launcher.local.object_store_memory=80000000"]
SYNTH = ["workload.jobs=300", "workload.arrival_rate=0.01"]
RESUME = ["workload.jobs=3000", "workload.arrival_rate=0.05", "policy=conservative"]  # ~0.4 s a run
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}


def sweep(cwd: Path, *overrides: str, check: bool = True, timeout: float = 240,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python sweeps/run.py -m SMALL… overrides…`` in ``cwd`` (environment ``env``, default ``ENV``)."""
    proc = subprocess.run([sys.executable, str(RUN), "-m", *SMALL, *overrides], cwd=cwd, env=env or ENV,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"sweep failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}")
    return proc


def runs(uri: str, experiment: str = "schedlab-adhoc", max_results: int = 1000) -> list:
    """The runs of ``experiment`` (a sweep with command-line overrides is ad hoc, see conf/config.yaml)."""
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=max_results)


def sqlite_uri(cwd: Path) -> str:
    return f"sqlite:///{cwd}/mlflow.db"


def by_key(found: list) -> dict[str, dict[str, float]]:
    return {r.data.tags["schedlab.run_key"]: r.data.metrics for r in found if r.info.status == "FINISHED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, command line) of every process, from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            table[int(entry.name)] = (int(stat.rpartition(")")[2].split()[1]), cmdline)
    return table


def descendants(pid: int) -> dict[int, str]:
    table, found, frontier = processes(), {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, cmdline) in table.items():
            if ppid == parent and child not in found:
                found[child] = cmdline
                frontier.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL a process we started and everything below it, by pid."""
    for target in [pid, *descendants(pid)]:
        with contextlib.suppress(OSError):
            os.kill(target, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            break
        time.sleep(0.05)


def wait_for_text(proc: subprocess.Popen, text: str, timeout: float = 120) -> str:
    """Read ``proc``'s stderr until ``text`` appears (the progress bar has no newlines)."""
    seen, deadline = "", time.monotonic() + timeout
    fd = proc.stderr.fileno()
    while text not in seen:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise AssertionError(f"{text!r} never appeared:\n{seen[-3000:]}")
        if select.select([fd], [], [], 0.2)[0]:
            seen += os.read(fd, 65536).decode(errors="replace")
    return seen


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """Two policies × two seeds on a private local Ray instance (once per session): its folder and its output."""
    def build(cwd: Path) -> None:
        (cwd / "stdout.txt").write_text(sweep(cwd, *SYNTH, "policy=easy,conservative", "seed=0,1").stdout)

    cwd = built_once(tmp_path_factory, "local-sweep", build)
    return cwd, subprocess.CompletedProcess([], 0, (cwd / "stdout.txt").read_text())


def test_local_multirun_logs_every_run(local_sweep: tuple[Path, subprocess.CompletedProcess]) -> None:
    cwd, proc = local_sweep
    found = runs(sqlite_uri(cwd))
    assert len(found) == 4 and {r.info.status for r in found} == {"FINISHED"}
    combos = {(r.data.params["policy"], r.data.params["seed"]) for r in found}
    assert combos == {(p, s) for p in ("easy", "conservative") for s in ("0", "1")}
    for r in found:
        assert r.data.params["cluster.nodes"] == "16" and r.data.params["workload.jobs"] == "300"
        assert not any(k.startswith("hydra") for k in r.data.params)
        assert r.data.metrics["jobs"] == 300 and 0 < r.data.metrics["util"] <= 1
        assert {"wait/mean", "wait/p95", "bsld/mean", "makespan", "sim/seconds"} <= set(r.data.metrics)
        tags = r.data.tags
        assert tags["schedlab.version"] and tags["schedlab.git_commit"] and tags["schedlab.ray_node"]
        artifacts = {a.path for a in MlflowClient(sqlite_uri(cwd)).list_artifacts(r.info.run_id)}
        assert artifacts == {"jobs.parquet", "config.yaml"}
    assert len({r.data.tags["schedlab.sweep_id"] for r in found}) == 1
    assert len({r.data.tags["schedlab.run_key"] for r in found}) == 4
    assert "4 done, 0 failed, 0 skipped" in proc.stdout and "easy" in proc.stdout  # summary + policy table


def test_job_table_artifact_and_common_random_numbers(local_sweep: tuple[Path, subprocess.CompletedProcess]) -> None:
    import pandas as pd

    cwd, _ = local_sweep
    client = MlflowClient(sqlite_uri(cwd))
    tables = {}
    for r in runs(sqlite_uri(cwd)):
        path = client.download_artifacts(r.info.run_id, "jobs.parquet", str(cwd / r.info.run_id))
        tables[(r.data.params["policy"], r.data.params["seed"])] = pd.read_parquet(path)
    cols = ["job_id", "submit_time", "nodes", "time_limit"]
    easy, cons = tables[("easy", "0")], tables[("conservative", "0")]
    assert len(easy) == 300 and {"start_time", "end_time", "wait", "bsld"} <= set(easy.columns)
    pd.testing.assert_frame_equal(easy[cols], cons[cols])  # same jobs for a seed, whatever the policy
    assert not easy[cols].equals(tables[("easy", "1")][cols])


@pytest.mark.slow  # make test-slow: a long fault case (issue 37: the default suite under 10 min)
def test_resume_after_killed_driver_runs_only_missing(tmp_path: Path) -> None:
    args = [sys.executable, str(RUN), "-m", *SMALL, *RESUME, "seed=range(0,8)"]
    driver = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_text(driver, "done=2 ")  # two runs are in MLflow (the driver logs, then counts)
    finally:
        kill_tree(driver.pid)  # SIGKILL, driver and its Ray processes: no chance to clean up
    done_before = len([r for r in runs(sqlite_uri(tmp_path)) if r.info.status == "FINISHED"])
    assert 2 <= done_before < 8
    proc = sweep(tmp_path, *RESUME, "seed=range(0,8)")
    found = [r for r in runs(sqlite_uri(tmp_path)) if r.info.status == "FINISHED"]
    assert {r.info.status for r in runs(sqlite_uri(tmp_path))} <= {"FINISHED", "KILLED"}  # no RUNNING leftovers
    keys = [r.data.tags["schedlab.run_key"] for r in found]
    assert len(keys) == 8 and len(set(keys)) == 8  # all there, no duplicates
    assert f"{8 - done_before} done, 0 failed, {done_before} skipped" in proc.stdout
    assert "left RUNNING by a sweep that died: marked KILLED and run again" in proc.stdout  # its dead claims

    # sweep.force reruns a finished run; same seed ⇒ identical metrics in another process and sweep
    forced = sweep(tmp_path, *RESUME, "seed=5", "sweep.force=true")
    assert "1 done, 0 failed, 0 skipped" in forced.stdout
    metrics: dict[str, list] = {}
    for r in [r for r in runs(sqlite_uri(tmp_path)) if r.info.status == "FINISHED"]:
        metrics.setdefault(r.data.tags["schedlab.run_key"], []).append(
            {k: v for k, v in r.data.metrics.items() if k != "sim/seconds"})
    repeated = [m for m in metrics.values() if len(m) > 1]
    assert len(repeated) == 1 and repeated[0][0] == repeated[0][1]


def test_failed_run_is_recorded_and_others_complete(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("job_submit_time,num_nodes,time_limit\n0,4,100\n10,16,50\n20,2,30\n")
    bad.write_text("job_submit_time,num_nodes,time_limit\n0,4,100\n10,many,50\n")
    proc = sweep(tmp_path, "workload=drevt_csv", "workload.path=good.csv,bad.csv", "policy=easy,fcfs", "seed=0",
                 check=False)
    assert proc.returncode != 0
    assert "2 done, 2 failed, 0 skipped" in proc.stdout
    failed = [line for line in proc.stdout.splitlines() if line.startswith("  FAILED #")]
    assert len(failed) == 2 and all("traceback.txt in MLflow run" in line for line in failed)
    assert not any("tracking" in line or "hydra" in line for line in failed)  # the run's name, not its overrides
    first = min(int(line.split("#")[1].split()[0]) for line in failed)
    assert f"(first: #{first}," in proc.stderr
    found = runs(sqlite_uri(tmp_path))
    assert sorted(r.info.status for r in found) == ["FAILED", "FAILED", "FINISHED", "FINISHED"]
    client = MlflowClient(sqlite_uri(tmp_path))
    for r in found:
        if r.info.status == "FAILED":
            assert r.data.params["workload.path"] == "bad.csv" and "many" in r.data.tags["schedlab.error"]
            tb = Path(client.download_artifacts(r.info.run_id, "traceback.txt", str(tmp_path)))
            assert "Traceback" in tb.read_text() and "InputError" in tb.read_text()


def test_killed_worker_is_retried_and_sweep_completes(tmp_path: Path) -> None:
    args = [sys.executable, str(RUN), "-m", *SMALL, "workload.jobs=6000", "workload.arrival_rate=0.05",
            "policy=conservative", "seed=0,1,2"]
    driver = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    killed = None
    try:
        deadline = time.monotonic() + 120
        while killed is None and time.monotonic() < deadline and driver.poll() is None:
            for pid, cmdline in descendants(driver.pid).items():
                if cmdline.startswith("ray::_execute"):
                    os.kill(pid, signal.SIGKILL)
                    killed = pid
                    break
            time.sleep(0.05)
        out, _ = driver.communicate(timeout=180)
    finally:
        kill_tree(driver.pid)
    assert killed is not None, "no worker was seen running a task"
    assert driver.returncode == 0, out[-3000:]
    assert "3 done, 0 failed" in out
    assert sorted(r.info.status for r in runs(sqlite_uri(tmp_path))) == ["FINISHED"] * 3


# -- an existing two-node Ray cluster, and an MLflow server --------------------------------------------

@pytest.fixture()
def two_node_cluster() -> Iterator[str]:
    """``ray start --head`` + a second ``ray start --address``, one CPU each; stopped by pid afterwards."""
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must stay short
    port = free_port()
    common = ["--num-cpus", "1", "--object-store-memory", "80000000", "--disable-usage-stats"]
    ray = str(Path(sys.executable).parent / "ray")
    try:
        subprocess.run([ray, "start", "--head", "--port", str(port), "--include-dashboard=false",
                        "--temp-dir", temp_dir, *common], env=ENV, check=True, capture_output=True, timeout=120)
        subprocess.run([ray, "start", "--address", f"127.0.0.1:{port}", *common], env=ENV, check=True,
                       capture_output=True, timeout=120)
        yield f"127.0.0.1:{port}"
    finally:
        for pid, (_, cmdline) in processes().items():  # ours alone: they carry our temp dir
            if temp_dir in cmdline:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


def test_two_node_cluster_gives_the_local_metrics(two_node_cluster: str, tmp_path: Path,
                                                  local_sweep: tuple[Path, subprocess.CompletedProcess]) -> None:
    proc = sweep(tmp_path, *SYNTH, "policy=easy,conservative", "seed=0,1",
                 f"hydra.launcher.address={two_node_cluster}")
    assert "4 done, 0 failed" in proc.stdout
    found = runs(sqlite_uri(tmp_path))
    assert len({r.data.tags["schedlab.ray_node"] for r in found}) == 2  # both nodes ran runs
    cluster, local = by_key(found), by_key(runs(sqlite_uri(local_sweep[0])))
    assert cluster.keys() == local.keys()
    for key, metrics in cluster.items():
        assert {k: v for k, v in metrics.items() if k != "sim/seconds"} == {
            k: v for k, v in local[key].items() if k != "sim/seconds"}


def start_mlflow_server(folder: Path) -> tuple[subprocess.Popen, str]:
    """``mlflow server`` on loopback over a SQLite store in ``folder``, once it answers: the process and its URI."""
    port = free_port()
    mlflow = str(Path(sys.executable).parent / "mlflow")
    server = subprocess.Popen([mlflow, "server", "--backend-store-uri", f"sqlite:///{folder}/server.db",
                               "--artifacts-destination", str(folder / "server-artifacts"),
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              cwd=folder, env={**ENV, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                if response.status == 200:
                    return server, uri
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                kill_tree(server.pid)
                raise
            time.sleep(0.3)


@pytest.fixture()
def mlflow_server(tmp_path: Path) -> Iterator[str]:
    server, uri = start_mlflow_server(tmp_path)
    try:
        yield uri
    finally:
        kill_tree(server.pid)


def test_sweep_logs_through_mlflow_server(mlflow_server: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = sweep(work, *SYNTH, "policy=easy,fcfs", "seed=0,1", "tracking=server", f"tracking.uri={mlflow_server}")
    assert "4 done" in proc.stdout
    found = runs(mlflow_server)
    assert len(found) == 4 and {r.info.status for r in found} == {"FINISHED"}
    artifacts = {a.path for a in MlflowClient(mlflow_server).list_artifacts(found[0].info.run_id)}
    assert artifacts == {"jobs.parquet", "config.yaml"}
    assert not (work / "mlflow.db").exists() and not (work / "mlruns").exists()


# -- the same faults at N = 2,000 tiny runs (issue 14; about 100 s on two cores) ----------------------


@pytest.mark.slow  # a large check (make test-slow); the same faults at N = 2 are in the default suite
def test_2000_run_sweep_with_a_failing_run_and_a_killed_driver(tmp_path: Path) -> None:
    """2,000 tiny replays, one of them a bad trace: the driver is SIGKILLed after 300 are done; the rerun
    runs only the rest, the bad one fails alone (the others complete), and every run key is recorded
    FINISHED exactly once."""
    good = "job_submit_time,num_nodes,time_limit\n0,4,100\n10,16,50\n20,2,30\n"
    for i in range(2000):
        (tmp_path / f"t{i}.csv").write_text(good if i != 1234 else good.replace("16", "many"))
    # replications=1: a replay is deterministic, so the default 5 seeds would plan 10,000 runs and skip 8,000
    task = ["workload=drevt_csv", f"workload.path={','.join(f't{i}.csv' for i in range(2000))}", "policy=easy",
            "replications=1"]
    driver = subprocess.Popen([sys.executable, str(RUN), "-m", *SMALL, *task], cwd=tmp_path, env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_text(driver, "done=300 ", timeout=900)
    finally:
        kill_tree(driver.pid)
    done_before = len([r for r in runs(sqlite_uri(tmp_path), max_results=5000) if r.info.status == "FINISHED"])
    assert 300 <= done_before < 1234

    proc = sweep(tmp_path, *task, check=False, timeout=1800)
    assert proc.returncode != 0 and "the others completed" in proc.stderr
    assert f"{1999 - done_before} done, 1 failed, {done_before} skipped" in proc.stdout
    found = runs(sqlite_uri(tmp_path), max_results=5000)
    assert {r.info.status for r in found} <= {"FINISHED", "FAILED", "KILLED"}
    assert [r.data.params["workload.path"] for r in found if r.info.status == "FAILED"] == ["t1234.csv"]
    keys = [r.data.tags["schedlab.run_key"] for r in found if r.info.status == "FINISHED"]
    assert len(keys) == 1999 and len(set(keys)) == 1999


def test_the_failure_message_says_whether_any_run_completed() -> None:
    from hydra_plugins.schedlab_ray_launcher.batch import SweepStats, failed_error
    from sweeps.planner import Run
    from sweeps.record import RunReport

    failure = (Run(3, ["seed=3"], {}, {}), RunReport("FAILED", error="E: x"))
    every = SweepStats(total=2, failed=2, failures=[failure])
    assert str(failed_error(every)).startswith("2 of 2 runs failed (first: #3, E: x); none completed; ")
    later = (Run(7, ["seed=7"], {}, {}), RunReport("FAILED", error="E: y"))
    assert "(first: #3, E: x)" in str(failed_error(SweepStats(total=2, failed=2, failures=[later, failure])))
    assert "; the others completed;" in str(failed_error(SweepStats(total=3, done=1, failed=2, failures=[failure])))


def test_store_calls_wait_out_a_locked_sqlite_and_nothing_else(tmp_path: Path) -> None:
    import sqlite3
    from unittest import mock

    from sweeps import tracking

    calls = []

    def flaky(x: int) -> int:
        calls.append(x)
        if len(calls) < 3:
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        return 2 * x

    with mock.patch.object(tracking.time, "sleep") as slept:
        assert tracking.locked_retry(flaky, 21) == 42 and len(calls) == 3 and slept.call_count == 2
        with pytest.raises(ValueError, match="other"):
            tracking.locked_retry(mock.Mock(side_effect=ValueError("other")))
        assert slept.call_count == 2
        with pytest.raises(RuntimeError, match="locked"):
            tracking.locked_retry(mock.Mock(side_effect=RuntimeError("database is locked")))
        assert slept.call_count == 2 + tracking.LOCK_ATTEMPTS - 1
    tracking.MlflowStore(sqlite_uri(tmp_path), "x")
    with contextlib.closing(sqlite3.connect(tmp_path / "mlflow.db")) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize(("uri", "file", "remote", "folder"), [
    ("sqlite:////d/mlflow.db?timeout=30", "/d/mlflow.db", False, None),
    ("sqlite:////a%20b/x.db", "/a b/x.db", False, None),
    ("sqlite:///relative.db", "relative.db", False, None),
    ("sqlite://", None, False, None),
    ("sqlite:///:memory:", None, False, None),
    ("http://127.0.0.1:5000", None, True, None),
    ("https://mlflow.example/", None, True, None),
    ("file:///tmp/ml%20runs", None, False, "/tmp/ml runs"),
    ("mlruns", None, False, "mlruns"),
])
def test_one_parse_of_a_store_uri(uri: str, file: str | None, remote: bool, folder: str | None) -> None:
    from sweeps.tracking import StoreURI

    store = StoreURI(uri)
    assert (store.sqlite_file, store.remote, store.folder) == (
        None if file is None else Path(file), remote, None if folder is None else Path(folder))


def test_a_sqlite_uri_with_options_is_its_own_file(tmp_path: Path) -> None:
    """``sqlite:///…/mlflow.db?timeout=30``: WAL and the lock go to the real file (a stray file literally named
    ``mlflow.db?timeout=30`` was switched to WAL instead), and a worker knows the driver's store by that file."""
    import sqlite3

    from sweeps import preflight, tracking
    from sweeps.record import StoreLocation

    uri = f"sqlite:///{tmp_path}/mlflow.db?timeout=30"
    preflight.check_store(uri)
    tracking.MlflowStore(uri, "x")
    assert {p.name for p in tmp_path.iterdir()} <= {"mlflow.db", "mlflow.db.lock", "mlflow.db-wal", "mlflow.db-shm"}
    with contextlib.closing(sqlite3.connect(tmp_path / "mlflow.db")) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    here = StoreLocation.of(uri, "x", None)
    assert here.file_id == ((stat := (tmp_path / "mlflow.db").stat()).st_dev, stat.st_ino) and here.reachable()


@pytest.mark.slow  # make test-slow: a long fault case (issue 37: the default suite under 10 min)
def test_a_sweep_submitted_with_ray_job_submit_records_its_runs(tmp_path: Path) -> None:
    """``ray job submit`` to a ``ray start --head`` on 127.0.0.1 (the job API through its dashboard): the job's
    driver joins that cluster (``hydra.launcher.address=auto``: the job's RAY_ADDRESS) and records its runs."""
    temp_dir = tempfile.mkdtemp(prefix="rj", dir="/tmp")
    port, dashboard = free_port(), free_port()
    ray = str(Path(sys.executable).parent / "ray")
    try:
        subprocess.run([ray, "start", "--head", "--port", str(port), "--include-dashboard=true",
                        "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard), "--num-cpus", "2",
                        "--dashboard-agent-listen-port", str(free_port()),  # the default 52365 may be taken
                        "--object-store-memory", "80000000", "--temp-dir", temp_dir, "--disable-usage-stats"],
                       env=ENV, check=True, capture_output=True, timeout=120)
        command = (f"cd {REPO} && {sys.executable} sweeps/run.py -m {' '.join(SMALL)} {' '.join(SYNTH)} "
                   f"policy=easy,fcfs seed=0 hydra.launcher.address=auto hydra.launcher.progress=false "
                   f"tracking.uri=sqlite:///{tmp_path}/mlflow.db tracking.artifact_root={tmp_path}/mlartifacts "
                   f"hydra.sweep.dir={tmp_path}/multirun")
        for _ in range(30):  # the job agent comes up after the head: "No available agent" until then
            job = subprocess.run([ray, "job", "submit", "--address", f"http://127.0.0.1:{dashboard}", "--",
                                  "bash", "-c", command], env=ENV, capture_output=True, text=True, timeout=600)
            if "No available agent" not in job.stderr:
                break
            time.sleep(2)
        assert job.returncode == 0 and "succeeded" in job.stdout, job.stdout[-3000:] + job.stderr[-2000:]
        assert "connecting to Ray at" in job.stdout and "2 done, 0 failed" in job.stdout, job.stdout[-3000:]
    finally:
        for pid, (_, cmdline) in processes().items():  # ours alone: they carry our temp dir
            if temp_dir in cmdline:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    found = runs(sqlite_uri(tmp_path))
    assert len(found) == 2 and {r.info.status for r in found} == {"FINISHED"}
