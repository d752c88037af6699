"""The Ray launcher (hydra_plugins/schedlab_ray_launcher): Hydra's launcher conformance suites against
``hydra/launcher=ray``, parametrised the way the official Ray and joblib plugins run them, and where its
runs' records are written.

One small Ray instance serves the module: the in-process sweeps of ``LauncherTestSuite`` find it
running (the launcher then neither starts nor stops Ray), the ``IntegrationTestSuite`` apps join it
with ``hydra.launcher.address``, so no test pays Ray's start-up.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
import ray
from hydra import version
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException, Hydra14MigrationWarning
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.test_utils.launcher_common_tests import (
    BatchedSweeperTestSuite,
    IntegrationTestSuite,
    LauncherTestSuite,
)
from hydra.test_utils.test_utils import TSweepRunner
from omegaconf import OmegaConf

from hydra_plugins.schedlab_ray_launcher.ray_launcher import RayLauncher, SerialLauncher
from sweeps.planner import Planner, Run
from sweeps.record import RunRecord, RunResult, StoreLocation
from sweeps.run import main
from sweeps.tracking import Claim
from tests.test_sweeper import RUN, SYNTH, runs


@pytest.fixture(scope="module", autouse=True)
def ray_session() -> Iterator[str]:
    """One local Ray instance for the module (one CPU, a small object store)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_MODE", "disabled")
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        info = ray.init(num_cpus=1, object_store_memory=78_643_200, include_dashboard=False,
                        logging_level="WARNING")
        try:
            yield info.address_info["gcs_address"]
        finally:
            ray.shutdown()


@pytest.fixture()
def fresh_version_base(hydra_restore_singletons: None) -> None:
    """Hydra's version base as the suites' apps get it in a fresh process (they set none: Hydra's
    1.1 compatibility), whatever ``@hydra.main`` or ``initialize(version_base="1.3")`` set earlier in
    the session; ``hydra_restore_singletons`` puts the previous one back."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Hydra14MigrationWarning)
        version.setbase("1.1")


@pytest.mark.usefixtures("fresh_version_base")
@pytest.mark.parametrize("launcher_name, overrides", [
    ("ray", ["hydra.launcher.progress=false"]),
    ("serial", ["hydra.launcher.progress=false"]),
])
class TestRayLauncher(LauncherTestSuite):
    """Hydra's LauncherTestSuite on schedlab's launchers under Hydra's basic sweeper."""


@pytest.mark.usefixtures("fresh_version_base")
@pytest.mark.parametrize("launcher_name, overrides", [
    ("ray", ["hydra.sweeper.max_batch_size=2", "hydra.launcher.progress=false"]),
])
class TestBasicSweeperBatches(BatchedSweeperTestSuite):
    """Hydra's BatchedSweeperTestSuite: Hydra's basic sweeper in batches of two, each launched on Ray."""


@pytest.mark.usefixtures("fresh_version_base")
def test_optunas_sweeper_drives_the_launcher_for_any_app(hydra_sweep_runner: TSweepRunner, tmp_path: Path) -> None:
    """Hydra's Optuna sweeper on the Ray launcher with an app that is not schedlab's (no callback, nothing
    planned or recorded): each trial's JobReturn is what its task function returned, and the study finds the
    minimum, as on Hydra's own launcher."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the tune extra (make test installs it)")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text("x: 0\n")
    sweep = hydra_sweep_runner(calling_file=str(tmp_path / "app.py"), calling_module=None,
                               task_function=lambda cfg: float((cfg.x - 2) ** 2), config_path="conf",
                               config_name="config", temp_dir=tmp_path / "multirun",
                               overrides=["hydra/sweeper=optuna", "hydra/launcher=ray", "hydra.sweeper.n_trials=8",
                                          "hydra.sweeper.n_jobs=2", "hydra.sweeper.sampler.seed=1",
                                          "hydra.launcher.progress=false", "x=choice(0,1,2,3,4)"])
    with sweep:
        results = OmegaConf.load(tmp_path / "multirun" / "optimization_results.yaml")
    assert results.best_value == 0.0 and results.best_params.x == 2


@pytest.fixture()
def extra_flags(ray_session: str) -> list[str]:
    """The integration apps' flags: the Ray launcher, joining the module's Ray."""
    return ["-m", "hydra/launcher=ray", "hydra/hydra_logging=hydra_debug", "hydra/job_logging=disabled",
            f"hydra.launcher.address={ray_session}", "hydra.launcher.progress=false"]


@pytest.mark.parametrize("task_launcher_cfg", [{}])
class TestRayLauncherIntegration(IntegrationTestSuite):
    """Hydra's IntegrationTestSuite: apps in subprocesses, ``-m hydra/launcher=ray``."""


def test_discovery() -> None:
    launchers = [x.__name__ for x in Plugins.instance().discover(Launcher)]
    assert RayLauncher.__name__ in launchers and SerialLauncher.__name__ in launchers
    assert "BasicSweeper" in [x.__name__ for x in Plugins.instance().discover(Sweeper)]


def schedlab_sweep(runner: TSweepRunner, folder: Path, launcher: str, *extra: str) -> list[JobReturn]:
    """Two runs of schedlab's real config and task function with ``hydra/launcher=launcher``, recorded in
    ``folder``'s store, swept in ``folder/launcher``."""
    overrides = [f"hydra/launcher={launcher}", "cluster=hpc16", *SYNTH, "policy=easy,fcfs", "seed=4",
                 f"tracking.uri=sqlite:///{folder}/mlflow.db", f"tracking.artifact_root={folder}/mlartifacts", *extra]
    sweep = runner(calling_file=str(RUN), calling_module=None, task_function=main.__wrapped__,
                   config_path="../conf", config_name="config", overrides=overrides, temp_dir=folder / launcher)
    with sweep:
        return list(sweep.returns[0])


def test_ray_mlflow_keeps_the_contract(hydra_sweep_runner: TSweepRunner, tmp_path: Path) -> None:
    """schedlab's launchers (recording on) return what Hydra's basic launcher returns for the same jobs —
    configs, overrides, numbering, directories — with each run's :class:`RunResult` (the metrics recorded)
    as its value, and a run skipped as recorded before returns the same result from the store."""
    version.setbase("1.3")  # as sweeps/run.py's @hydra.main does
    basic = schedlab_sweep(hydra_sweep_runner, tmp_path, "basic", "~hydra.callbacks.schedlab")  # records nothing
    for launcher in ("ray_mlflow", "serial"):
        ours = schedlab_sweep(hydra_sweep_runner, tmp_path, launcher, "sweep.force=true")
        assert len(ours) == len(basic) == 2
        for num, (ref, ret) in enumerate(zip(basic, ours, strict=True)):
            assert ret.status == ref.status == JobStatus.COMPLETED
            assert ret.overrides[0] == ("policy=easy", "policy=fcfs")[num]
            assert ret.overrides == [*ref.overrides, "sweep.force=True"]  # as Hydra's sweeper writes it
            assert "hydra" not in ret.cfg and ret.cfg.sweep.force
            assert OmegaConf.masked_copy(ret.cfg, [k for k in ret.cfg if k != "sweep"]) == OmegaConf.masked_copy(
                ref.cfg, [k for k in ref.cfg if k != "sweep"])
            assert ret.working_dir is not None and Path(ret.working_dir).name == Path(ref.working_dir).name
            assert ret.task_name == ref.task_name == "run"
            for key in ("job.name", "job.num", "job.id", "job.chdir"):
                assert OmegaConf.select(ret.hydra_cfg.hydra, key) == OmegaConf.select(ref.hydra_cfg.hydra, key), key
            assert list(ret.hydra_cfg.hydra.overrides.task) == ret.overrides
            assert Path(ret.hydra_cfg.hydra.runtime.output_dir) == tmp_path / launcher / str(num)
            assert isinstance(ret.return_value, RunResult) and ret.return_value.run_id is not None
            assert ret.return_value.metrics == {**ref.return_value.summary, "sim/seconds": mock.ANY}

    skipped = schedlab_sweep(hydra_sweep_runner, tmp_path, "ray_mlflow")
    for num, ret in enumerate(skipped):
        assert ret.status == JobStatus.COMPLETED and isinstance(ret.return_value, RunResult)
        assert ret.return_value.metrics == {**basic[num].return_value.summary, "sim/seconds": mock.ANY}
        assert str(ret.return_value) == f"finished in MLflow run {ret.return_value.run_id}"
        assert ret.cfg == basic[num].cfg and ret.hydra_cfg.hydra.job.num == num and ret.task_name == "run"


def stopped_sweep(runner: TSweepRunner, folder: Path, match: str) -> dict:
    """:func:`schedlab_sweep` on the Ray launcher, which must stop with a message matching ``match``; the
    counts it saved."""
    with pytest.raises(CompactHydraException, match=match):
        schedlab_sweep(runner, folder, "ray_mlflow")
    return json.loads(next((folder / "ray_mlflow").glob("sweep-*.json")).read_text())


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_result_that_cannot_be_recorded_is_never_counted_done(hydra_sweep_runner: TSweepRunner, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's store refuses every write (a disk that filled up mid-sweep)."""
    def refuse(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    version.setbase("1.3")
    elsewhere = StoreLocation.of
    monkeypatch.setattr(StoreLocation, "of", lambda *args: dataclasses.replace(elsewhere(*args), host="elsewhere"))
    monkeypatch.setattr(Planner, "claim_on_workers", lambda self, local: None)  # as for a cluster: the driver claims
    monkeypatch.setattr(RunRecord, "write", refuse)  # the driver's writes (the workers cannot see the store)
    stats = stopped_sweep(hydra_sweep_runner, tmp_path, r"sweep stopped: run #\d \(\w+ seed=\d.*\) ended but could "
                                                        r"not be recorded: OSError: .*No space left on device")
    assert (stats["done"], stats["failed"], stats["not_run"]) == (0, 0, 2)


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_record_the_worker_cannot_write_stops_the_sweep(hydra_sweep_runner: TSweepRunner, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's records go to a store file that is not a database."""
    db = tmp_path / "broken.db"
    db.write_bytes(b"not a database " * 100)

    def broken(self: Planner, run: Run) -> RunRecord:
        return RunRecord(StoreLocation.of(f"sqlite:///{db}", "x", None), Claim("r", "file:///nowhere", 0), run.plain)

    version.setbase("1.3")
    monkeypatch.setattr(Planner, "recorder", broken)
    stats = stopped_sweep(hydra_sweep_runner, tmp_path, r"sweep stopped: run #\d \(.*\) ended but could not be "
                                                        r"recorded: .*not a database")
    assert (stats["done"], stats["failed"], stats["not_run"]) == (0, 0, 2)
    assert db.read_bytes() == b"not a database " * 100


def recorded(folder: Path) -> list:
    """The runs of ``folder``'s store."""
    return runs(f"sqlite:///{folder}/mlflow.db")


def test_ray_workers_write_the_records(hydra_sweep_runner: TSweepRunner, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """With the store on this machine the driver writes nothing: each worker logs its own run, with
    everything the driver would have logged (fingerprints, params, the job table)."""
    def driver_writes(*_: object, **__: object) -> str:
        raise AssertionError("the driver wrote a record")

    version.setbase("1.3")
    monkeypatch.setattr(RunRecord, "write", driver_writes)  # this process only: Ray's workers have their own
    returns = schedlab_sweep(hydra_sweep_runner, tmp_path, "ray_mlflow")
    assert [r.status for r in returns] == [JobStatus.COMPLETED] * 2
    found = recorded(tmp_path)
    assert sorted(r.data.params["policy"] for r in found) == ["easy", "fcfs"]
    for run in found:
        assert run.info.status == "FINISHED" and run.data.metrics["jobs"] == 300 and "sim/seconds" in run.data.metrics
        assert {"schedlab.code", "schedlab.inputs", "schedlab.run_key", "schedlab.ray_node"} <= set(run.data.tags)
    assert len(list((tmp_path / "mlartifacts").rglob("jobs.parquet"))) == 2


def test_a_worker_on_another_machine_hands_its_record_to_the_driver(
        hydra_sweep_runner: TSweepRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that cannot see the driver's SQLite file (another host) writes nothing; the driver
    writes the same record from the outcome it gets back."""
    elsewhere = StoreLocation.of

    def on_another_host(*args: str | None) -> StoreLocation:
        return dataclasses.replace(elsewhere(*args), host="another-machine")

    version.setbase("1.3")
    monkeypatch.setattr(StoreLocation, "of", on_another_host)
    # the driver claims, as when Ray is a cluster (a local instance's workers claim: they see the store)
    monkeypatch.setattr(Planner, "claim_on_workers", lambda self, local: None)
    schedlab_sweep(hydra_sweep_runner, tmp_path, "ray_mlflow")
    found = recorded(tmp_path)
    assert len(found) == 2 and {r.info.status for r in found} == {"FINISHED"}
    assert all("schedlab.code" in r.data.tags and r.data.metrics["jobs"] == 300 for r in found)


def test_a_worker_that_cannot_claim_fails_its_run_saying_why(
        hydra_sweep_runner: TSweepRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that should claim but cannot see the store: each run FAILED (recorded by the driver), the error
    naming the store, not Ray's wrapper."""
    elsewhere = StoreLocation.of
    version.setbase("1.3")
    monkeypatch.setattr(StoreLocation, "of", lambda *args: dataclasses.replace(elsewhere(*args), host="another"))
    with pytest.raises(CompactHydraException, match="2 of 2 runs failed"):  # RunFailedError as Hydra loaded it
        schedlab_sweep(hydra_sweep_runner, tmp_path, "ray_mlflow")
    found = recorded(tmp_path)
    assert len(found) == 2 and {r.info.status for r in found} == {"FAILED"}
    assert all(r.data.tags["schedlab.error"].startswith("RuntimeError: this worker cannot reach the tracking store")
               for r in found)


def test_store_locations(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"")
    here = StoreLocation.of(f"sqlite:///{db}", "e", None)
    assert here.reachable() and here.file_id is not None
    assert not dataclasses.replace(here, host="another-machine").reachable()
    (tmp_path / "other.db").write_bytes(b"")
    (tmp_path / "other.db").replace(db)  # the same path, another file: a node whose own disk has a store there
    assert not here.reachable()
    assert not StoreLocation.of(f"sqlite:///{tmp_path}/new.db", "e", None).reachable()  # workers never create one
    server = StoreLocation.of("http://127.0.0.1:5000", "e", None)
    assert dataclasses.replace(server, host="another-machine").reachable()
