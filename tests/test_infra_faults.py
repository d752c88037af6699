"""Infrastructure trouble ends fast with one message, exits non-zero and runs nothing (issue 9 §5).

Each case is ``sweeps/run.py -m`` in a subprocess from its own folder, on a tiny workload. Before these
checks the first two hung (killed at 150 s and 120 s), the server case retried for 4 min 15 s.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from mlflow.tracking import MlflowClient

from hydra_plugins.schedlab_ray_launcher._checks import cgroup_quota, usable_cpus
from sweeps import preflight
from tests.test_sweeper import (  # noqa: F401 (two_node_cluster: a fixture)
    ENV,
    RESUME,
    RUN,
    SMALL,
    descendants,
    free_port,
    kill_tree,
    runs,
    sqlite_uri,
    sweep,
    two_node_cluster,
)

TINY = ["workload.jobs=20", "seed=1"]
BOUND = 30.0  # seconds, the limit; every case here needs no Ray, so it is mostly Python start-up


def fails_fast(cwd: Path, *overrides: str, message: str, env: dict[str, str] | None = None,
               bound: float = BOUND) -> str:
    """Run the sweep; assert it failed within ``bound`` with ``message`` once, no traceback, nothing run.
    Returns stdout + stderr."""
    tic = time.monotonic()
    proc = sweep(cwd, *TINY, *overrides, check=False, timeout=bound + 30, env=env)
    seconds = time.monotonic() - tic
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert seconds < bound, f"took {seconds:.1f} s:\n{out}"
    assert out.count(message) == 1, out
    assert "Traceback" not in proc.stderr and "nothing was run" in out, out
    assert "HYDRA_FULL_ERROR" not in out, out  # Hydra's hint after a one-line error: no stack to see
    assert "starting a local Ray" not in out and not re.search(r"\b[1-9]\d* done", proc.stdout), out
    return out


def test_unreachable_address(tmp_path: Path) -> None:
    out = fails_fast(tmp_path, "hydra.launcher.address=127.0.0.1:1",
                     message="cannot reach a Ray cluster at 127.0.0.1:1 (hydra.launcher.address)")
    assert "ray start --head" in out and "hydra.launcher.address=local" in out
    assert not (tmp_path / "mlflow.db").exists()  # the store is checked, not created


def test_an_address_that_is_not_a_ray_cluster(tmp_path: Path) -> None:
    """Something listens on the address but it is not a Ray cluster (another service's port): one line within
    seconds (Ray's own join logged a gcs_client warning per try for 24 s first)."""
    import socket as sockets

    with sockets.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # accepts connections, never answers
        port = server.getsockname()[1]
        fails_fast(tmp_path, f"hydra.launcher.address=127.0.0.1:{port}", bound=15,
                   message=f"127.0.0.1:{port} (hydra.launcher.address) answers but not as a Ray cluster")


def test_more_cpus_per_run_than_the_machine(tmp_path: Path) -> None:
    cpus = usable_cpus().count
    wanted = max(64, cpus + 1)
    fails_fast(tmp_path, f"hydra.launcher.num_cpus={wanted}",
               message=f"hydra.launcher.num_cpus={wanted}: each run would reserve {wanted} CPUs but the local Ray "
                       f"instance has {cpus}, all this process may use; set hydra.launcher.num_cpus to at most {cpus}")


def test_local_instance_larger_than_the_machine(tmp_path: Path) -> None:
    cpus = usable_cpus().count
    fails_fast(tmp_path, f"hydra.launcher.local.num_cpus={cpus * 32}",
               message=f"hydra.launcher.local.num_cpus={cpus * 32}: expected 1 to {cpus} "
                       "(the CPUs this process may use)")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin the sweep to one of them")
def test_a_sweep_pinned_to_one_cpu_starts_a_one_cpu_ray_and_says_so(tmp_path: Path) -> None:
    """``taskset -c N`` (as a SLURM allocation's cpuset): the local Ray gets the one CPU, not the machine's."""
    cpu = min(os.sched_getaffinity(0))
    proc = subprocess.run(["taskset", "-c", str(cpu), sys.executable, str(RUN), "-m", *SMALL, "policy=easy", "seed=0",
                           "tracking=none", "hydra.launcher.progress=false"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    machine = os.cpu_count()
    assert (f"starting a local Ray instance (1 CPU: the CPUs it may run on (its CPU affinity: taskset, a SLURM "
            f"allocation) of the machine's {machine})") in proc.stdout
    assert "1 done" in proc.stdout
    refused = subprocess.run(["taskset", "-c", str(cpu), sys.executable, str(RUN), "-m", *SMALL, "policy=easy",
                              "tracking=none", "hydra.launcher.local.num_cpus=2"], cwd=tmp_path, env=ENV,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "hydra.launcher.local.num_cpus=2: expected 1 to 1 (the CPUs this process may use)" in refused.stderr


def test_a_cgroup_cpu_quota_caps_the_cpus(tmp_path: Path) -> None:
    """cgroup v2 ``cpu.max`` and v1 ``cpu.cfs_quota_us``, on the process's cgroup or an ancestor; the tightest
    wins, rounded down, at least 1; no quota ("max", -1) leaves the affinity."""
    v2 = tmp_path / "v2"
    (v2 / "slurm" / "job_7").mkdir(parents=True)
    (v2 / "slurm" / "cpu.max").write_text("250000 100000\n")  # 2.5 CPUs on an ancestor
    (v2 / "slurm" / "job_7" / "cpu.max").write_text("max 100000\n")
    (tmp_path / "v2.cgroup").write_text("0::/slurm/job_7\n")
    assert cgroup_quota(v2, tmp_path / "v2.cgroup") == 2.5
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct" / "docker" / "c1").mkdir(parents=True)
    (v1 / "cpu,cpuacct" / "docker" / "c1" / "cpu.cfs_quota_us").write_text("50000\n")
    (v1 / "cpu,cpuacct" / "docker" / "c1" / "cpu.cfs_period_us").write_text("100000\n")
    (v1 / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu,cpuacct" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "v1.cgroup").write_text("4:memory:/docker/c1\n3:cpu,cpuacct:/docker/c1\n")
    assert cgroup_quota(v1, tmp_path / "v1.cgroup") == 0.5
    half = usable_cpus(v1, tmp_path / "v1.cgroup")
    assert half.count == 1 and "cgroup's CPU quota (0.5 CPUs)" in str(half)
    (tmp_path / "none.cgroup").write_text("0::/\n")
    assert cgroup_quota(tmp_path, tmp_path / "none.cgroup") is None
    assert usable_cpus(tmp_path, tmp_path / "none.cgroup").count == len(os.sched_getaffinity(0))


def test_auto_address_without_a_cluster(tmp_path: Path) -> None:
    """No ``RAY_ADDRESS`` and an empty Ray temp folder: other users' Ray processes are not joined."""
    env = {k: v for k, v in ENV.items() if k != "RAY_ADDRESS"} | {"RAY_TMPDIR": str(tmp_path / "raytmp")}
    out = fails_fast(tmp_path, "hydra.launcher.address=auto", env=env,
                     message="hydra.launcher.address=auto: no Ray cluster found")
    assert str(tmp_path / "raytmp" / "ray" / "ray_current_cluster") in out


def test_tracking_server_down(tmp_path: Path) -> None:
    uri = f"http://127.0.0.1:{free_port()}"  # bound and released: nothing listens there
    out = fails_fast(tmp_path, "tracking=server", f"tracking.uri={uri}", bound=15,
                     message=f"the MLflow tracking server {uri} is not reachable")
    assert "tracking=sqlite" in out and "mlflow server --host 127.0.0.1" in out


def test_a_busy_tracking_server_is_asked_again_not_refused(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A server that accepts the connection but answers its first request only after the probe's timeout
    (busy) is waited for; one that never answers is refused after ``BUSY_SECONDS`` saying so."""
    import http.server
    import threading

    class Slow(http.server.BaseHTTPRequestHandler):
        delays: ClassVar[list[float]] = [1.5]  # the first answer comes after the probe's timeout, the next at once

        def do_GET(self) -> None:
            time.sleep(self.delays.pop() if self.delays else 0)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(preflight, "PROBE_SECONDS", 0.5)
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        preflight._probe_server(uri)
        assert "has not answered in 0.5 s; asking again" in capsys.readouterr().out
        Slow.delays = [5.0] * 10
        monkeypatch.setattr(preflight, "BUSY_SECONDS", 1.0)
        with pytest.raises(preflight.StoreUnusableError, match=r"not reachable \(no answer in 1 s\)"):
            preflight._probe_server(uri)
    finally:
        server.shutdown()


@pytest.mark.slow  # make test-slow: a long fault case (issue 37: the default suite under 10 min)
@pytest.mark.parametrize("group", [False, True], ids=["driver", "process-group"])
def test_sigterm_ends_a_sweep_as_ctrl_c_does(tmp_path: Path, group: bool) -> None:
    """SIGTERM to the driver, or to its whole process group (what ``timeout`` and ``kill -TERM -PGID`` send):
    the runs that finished are recorded, none is left RUNNING, the sweep says how to resume in one line (no
    traceback), and the rerun runs only the others. The group case failed 1 of 3 times while the local Ray
    shared the driver's process group: the raylet's SIGTERM made Ray end the driver from C++ first."""
    from tests.test_claims import count_finished

    args = [sys.executable, str(RUN), "-m", *SMALL, *RESUME, "seed=range(0,16)", "hydra.launcher.progress=false"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 180
    while count_finished(tmp_path / "mlflow.db") < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    (os.killpg if group else os.kill)(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err[-2000:]
    assert "sweep interrupted" in out and "rerun the same command to resume" in out
    assert "Traceback" not in err
    statuses = [r.info.status for r in runs(sqlite_uri(tmp_path))]
    done = statuses.count("FINISHED")
    assert "RUNNING" not in statuses and 2 <= done < 16
    again = subprocess.run(args, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert f"{16 - done} done, 0 failed, {done} skipped" in again.stdout


@pytest.mark.slow  # make test-slow: a long fault case (issue 37: the default suite under 10 min)
def test_a_tracking_server_killed_mid_sweep_is_one_line(tmp_path: Path) -> None:
    """The tracking server dies while a sweep records into it: the sweep stops with one line saying why and how
    to resume — no retries logged, no tracebacks (it printed ~250 lines of urllib3 retries and 11 of them)."""
    from tests.test_sweeper import start_mlflow_server

    server, uri = start_mlflow_server(tmp_path)
    try:
        args = [sys.executable, str(RUN), "-m", *SMALL, *RESUME, "seed=range(0,16)", "hydra.launcher.progress=false",
                "tracking=server", f"tracking.uri={uri}"]
        proc = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            found = runs(uri)
            if sum(r.info.status == "FINISHED" for r in found) >= 2:
                break
            time.sleep(0.5)
    finally:
        kill_tree(server.pid)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode not in (0, None)
    assert "Traceback" not in out + err and "Retrying" not in err, err[-3000:]
    stopped = [line for line in out.splitlines() if line.startswith("sweep stopped")]
    assert len(stopped) == 1 and "rerun the same command to resume" in out + err, out + err[-3000:]
    assert len((out + err).splitlines()) < 40, out + err


@pytest.mark.slow  # make test-slow: a long fault case (issue 37: the default suite under 10 min)
def test_a_full_disk_under_the_store_is_one_line(tmp_path: Path) -> None:
    """The store's disk fills up mid-sweep (a 5 MB tmpfs): the sweep stops with one line naming the cause and
    how to resume — no MLflow tracebacks forwarded from the workers (~130 lines of them), no Hydra hint."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"mounting a 5 MB tmpfs needs root: {mounted.stderr.decode().strip()}")
    try:
        proc = sweep(tmp_path, "workload.jobs=2000", "seed=range(0,40)", "hydra.launcher.progress=false",
                     f"tracking.uri=sqlite:///{small}/mlflow.db", f"tracking.artifact_root={small}/art",
                     check=False, timeout=300)
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out and "HYDRA_FULL_ERROR" not in out, out[-3000:]
    assert "database or disk is full" in out or "No space left on device" in out, out[-3000:]
    assert "rerun the same command to resume" in out and len(out.splitlines()) < 20, out


def test_a_killed_driver_takes_its_local_ray_with_it(tmp_path: Path) -> None:
    """SIGKILL the driver mid-sweep: everything it started — GCS, raylet, dashboard, the agents Ray retitles
    ``ray::DashboardAgent`` / ``ray::RuntimeEnvAgent``, workers — ends within seconds (they outlived it by 1–2
    minutes before the reaper, ``hydra_plugins/schedlab_ray_launcher/_reaper.py``, and the agents by ~60 s
    after its first version). None of them is in the driver's session, so a signal to the driver's process
    group (a terminal's Ctrl-C, ``timeout``) reaches the driver alone."""
    args = [sys.executable, str(RUN), "-m", *SMALL, "workload.jobs=6000", "workload.arrival_rate=0.05",
            "policy=conservative", "seed=range(0,6)", "hydra.launcher.progress=false"]
    driver = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, ours = time.monotonic() + 90, {}
        while time.monotonic() < deadline and driver.poll() is None:
            ours = descendants(driver.pid)
            if any("raylet" in c for c in ours.values()) and any(c.startswith("ray::_execute") for c in ours.values()) \
                    and any(c.startswith("ray::DashboardAgent") for c in ours.values()):
                break
            time.sleep(0.2)
        assert any("raylet" in c for c in ours.values()), "the sweep never started running"
        shared = [cmd for pid, cmd in ours.items() if _sid(pid) == os.getsid(driver.pid)]
        assert not shared, f"Ray processes in the driver's session (a terminal's Ctrl-C reaches them): {shared}"
        os.kill(driver.pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in ours):
            time.sleep(0.2)
        assert not [cmd for pid, cmd in ours.items() if Path(f"/proc/{pid}").exists()]
    finally:
        kill_tree(driver.pid)
        for pid in ours:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:  # ended meanwhile
        return None


@pytest.mark.parametrize("victim", [pytest.param("raylet", marks=pytest.mark.slow), "ray::DashboardAgent"])
def test_a_raylet_killed_mid_sweep_is_one_schedlab_line(tmp_path: Path, victim: str) -> None:
    """Ray ends the driver from C++ when its raylet dies (no Python ``finally`` runs) — killed itself, or with a
    killed agent it fate-shares with (the driver then ended with Ray's grpc/OOM guesses and no line of ours);
    the reaper says why in one line, and the runs recorded before are kept for the resume."""
    args = [sys.executable, str(RUN), "-m", *SMALL, "workload.jobs=6000", "workload.arrival_rate=0.05",
            "policy=conservative", "seed=range(0,6)", "hydra.launcher.progress=false"]
    driver = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and driver.poll() is None:
            below = descendants(driver.pid)
            if any(c.startswith("ray::_execute") for c in below.values()):
                break
            time.sleep(0.2)
        targets = [pid for pid, cmd in below.items() if cmd.split(" ", 1)[0].endswith(victim)]
        assert targets, "the sweep never started running"
        os.kill(targets[0], signal.SIGKILL)
        out, _ = driver.communicate(timeout=120)
    finally:
        kill_tree(driver.pid)
    assert driver.returncode != 0
    assert out.count("schedlab: the local Ray instance died under the sweep") == 1, out[-3000:]
    assert "Traceback" not in out
    assert {r.info.status for r in runs(sqlite_uri(tmp_path))} <= {"FINISHED", "RUNNING", "FAILED"}


def test_store_in_a_folder_that_is_not_a_file_system(tmp_path: Path) -> None:
    """``/proc`` looks writable to root, yet nothing can be created there (MLflow retried for minutes)."""
    fails_fast(tmp_path, "tracking.uri=sqlite:////proc/schedlab.db", bound=15,
               message="cannot record to sqlite:////proc/schedlab.db: cannot create a file in /proc")


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` write-protected even for root (``chattr +i`` then, as permissions do not stop root)."""
    immutable = os.geteuid() == 0
    if immutable and shutil.which("chattr") is None:
        pytest.fail("running as root needs chattr to make a file read-only")
    path.chmod(0o444)
    if immutable:
        subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(0o644)


def test_read_only_store(tmp_path: Path) -> None:
    MlflowClient(sqlite_uri(tmp_path)).search_experiments()  # a real MLflow store, tables created
    db = tmp_path / "mlflow.db"
    before = db.read_bytes()
    with read_only(db):
        out = fails_fast(tmp_path, message=f"cannot record to {sqlite_uri(tmp_path)}: {db} is not writable")
    assert "tracking=none" in out and db.read_bytes() == before
    assert runs(sqlite_uri(tmp_path), "schedlab-adhoc") == []


def test_a_sqlite_store_on_a_network_filesystem_is_warned_about(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The mount table says where a SQLite store lies: on NFS (or Lustre, GPFS …) a warning naming the server
    option comes before anything runs; on a local disk nothing is said."""
    shared = tmp_path / "shared space"
    (shared / "sub").mkdir(parents=True)
    real = Path("/proc/self/mountinfo").read_text()
    table = tmp_path / "mountinfo"
    table.write_text(real + f"99 27 0:99 / {str(shared).replace(' ', chr(92) + '040')} rw - nfs4 head:/export rw\n")
    monkeypatch.setattr(preflight, "MOUNT_TABLE", table)
    preflight.check_store(f"sqlite:///{shared}/sub/mlflow.db")
    out = capsys.readouterr().out
    assert out.startswith(f"warning: the SQLite store {shared}/sub/mlflow.db lies on a network filesystem "
                          f"(nfs4 at {shared})")
    assert "tracking=server tracking.uri=http://HOST:5000" in out
    preflight.check_store(f"sqlite:///{tmp_path}/mlflow.db")  # beside it, not on it
    assert preflight.network_filesystem(tmp_path) is None and capsys.readouterr().out == ""


def test_negative_max_retries(tmp_path: Path) -> None:
    fails_fast(tmp_path, "hydra.launcher.max_retries=-5",
               message="hydra.launcher.max_retries=-5: expected an integer >= 0 (or -1: retry forever)")


def test_sweep_says_where_it_records_and_that_ray_starts(tmp_path: Path) -> None:
    """From another folder, the store is named before anything runs (not a silent second store)."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    proc = sweep(work, *TINY, "hydra.launcher.local.num_cpus=1")
    uri = sqlite_uri(work)
    first = proc.stdout.splitlines()[0]
    assert first == f"recording to {uri} — view with: mlflow ui --backend-store-uri {uri}"
    assert "starting a local Ray instance (1 CPU)…" in proc.stdout
    assert proc.stdout.index("starting a local Ray") < proc.stdout.index("sweep finished")


@pytest.mark.slow
@pytest.mark.cluster
def test_cluster_without_a_node_that_big(two_node_cluster: str, tmp_path: Path) -> None:  # noqa: F811
    """Joining a cluster of 1-CPU nodes with 2 CPUs per run is refused once its nodes are known."""
    out = fails_fast(tmp_path, f"hydra.launcher.address={two_node_cluster}", "hydra.launcher.num_cpus=2",
                     message=f"no node of the Ray cluster at {two_node_cluster} has more than 1")
    assert f"connecting to Ray at {two_node_cluster}…" in out and "sweep stopped" in out and "2 not run" in out


def test_ray_failing_to_start_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A local Ray that times out starting (seen on an overloaded machine) stops the sweep with one line."""
    import ray

    from hydra_plugins.schedlab_ray_launcher import _core

    def timed_out(**_: object) -> None:
        raise Exception("The current node timed out during startup. This could happen because …\nmore")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", timed_out)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    with pytest.raises(_core.SweepAbortedError) as raised:  # the class _core raises (Hydra may re-import plugins)
        _core.connect({"local": {"num_cpus": 1}}, None, {})
    assert str(raised.value) == ("could not start a local Ray instance: The current node timed out during startup. "
                                 "This could happen because …; nothing was run (rerun to resume)")
    with pytest.raises(_core.SweepAbortedError, match=r"could not join the Ray cluster at 127\.0\.0\.1:9 "):
        _core.connect({}, "127.0.0.1:9", {})
