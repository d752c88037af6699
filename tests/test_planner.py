"""sweeps/planner.py: seeds of a deterministic workload are one run per cell; ad-hoc command lines get their own
experiment; what the MLflow run list shows (names, params, the machine size used)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from hydra import compose
from hydra.core.hydra_config import HydraConfig
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from sweeps._hydra import task_config
from sweeps.planner import ADHOC_EXPERIMENT, InvalidSweepError, Planner, Run, adhoc, run_name
from tests.conftest import REPO
from tests.test_identity import EXPERIMENT, conf, drive, multirun_config, trace_runs, write_trace  # noqa: F401
from tests.test_sweeper import SYNTH, runs, sqlite_uri, sweep

pytestmark = pytest.mark.usefixtures("conf")  # the real conf/, composed in this process

REPLAYS = {"swf", "drevt_csv", "workflow_file"}  # the workloads that read their jobs from a file


@pytest.fixture()
def trace_dir(tmp_path: Path) -> Path:
    return write_trace(tmp_path)


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "conf" / "workload").glob("*.yaml")))
def test_every_workload_declares_whether_it_is_stochastic(name: str) -> None:
    module, _, cls = OmegaConf.load(REPO / "conf" / "workload" / f"{name}.yaml")["_target_"].rpartition(".")
    spec = getattr(importlib.import_module(module), cls)
    assert isinstance(spec.stochastic, bool) and spec.stochastic is (name not in REPLAYS)


def test_seeds_of_a_trace_are_one_run_per_cell(trace_dir: Path) -> None:
    lists = [[*run, f"seed={seed}"] for run in trace_runs(trace_dir) for seed in range(5)]
    decisions, tracker = drive(lists, multirun_config("policy=easy,fcfs", "seed=range(0,5)", "workload=swf",
                                                      f"experiment_name={EXPERIMENT}"))
    assert decisions.count(None) == 2
    assert sorted(str(r) for r in decisions if r) == ["same run as #0"] * 4 + ["same run as #5"] * 4
    assert sorted(r.same_as for r in decisions if r) == [0] * 4 + [5] * 4
    assert "workload swf is deterministic: 5 seeds → 1 run per cell" in tracker.notes()
    found = runs(sqlite_uri(trace_dir), EXPERIMENT)
    assert sorted(r.info.run_name for r in found) == ["easy", "fcfs"]  # a seed would mean nothing here
    assert len(tracker.results) == 2  # the end-of-sweep table counts one run per cell
    other_seed, _ = drive([[*trace_runs(trace_dir)[0], "seed=7"]])
    assert other_seed[0] and other_seed[0].run_id and other_seed[0].metrics["jobs"] > 0  # any seed: the same run


def test_seeds_of_a_generated_workload_are_replications(tmp_path: Path) -> None:
    common = ["cluster=hpc16", *SYNTH, f"tracking.uri={sqlite_uri(tmp_path)}",
              f"tracking.artifact_root={tmp_path}/mlartifacts", "workload.arrival_rate=0.02"]
    lists = [[*common, f"seed={seed}"] for seed in range(3)]
    decisions, tracker = drive(lists, multirun_config("seed=range(0,3)", "workload.arrival_rate=0.01,0.02"))
    assert decisions == [None] * 3 and not any("deterministic" in line for line in tracker.notes())
    found = runs(sqlite_uri(tmp_path))
    assert sorted(r.info.run_name for r in found) == [f"easy seed={s} arrival_rate=0.02" for s in range(3)]


def test_mlflow_params_are_the_semantic_config(trace_dir: Path) -> None:
    drive(trace_runs(trace_dir, policies=("easy",)))
    [run] = runs(sqlite_uri(trace_dir), EXPERIMENT)
    params = run.data.params
    assert params["cluster.nodes"] == "16"  # the size the trace header gave, not None
    assert params["workload.path"] == "traces/x.swf" and params["policy"] == "easy"
    assert params["policy._target_"] == "sim.policies.backfill.SeedBackfill"  # the class is part of the record
    assert not [k for k in params if k.split(".")[0] in {"tracking", "sweep", "hydra"}]
    assert not {"experiment_name", "replications", "workload.base_dir"} & set(params)
    assert run.data.tags["schedlab.target.workload"] == "sweeps.specs.TraceFile"
    names = [e.name for e in MlflowClient(sqlite_uri(trace_dir)).search_experiments()]
    assert names == [EXPERIMENT]  # no empty "Default" beside it


def test_run_names_shorten_keys_and_trace_paths() -> None:
    cfg = {"policy": {"window": "ahead"}, "seed": 2}
    overrides = ["policy=conservative", "seed=2", "workload.path=/data/traces/KTH.swf", "cluster.nodes=64",
                 "workload.jobs=10", "engine.jobs=3", "tracking.uri=sqlite:///x"]
    swept = {"policy", "seed", "workload.path", "workload.jobs", "engine.jobs"}
    assert run_name("conservative", cfg, overrides, swept) == \
        "conservative seed=2 path=KTH.swf workload.jobs=10 engine.jobs=3"


@pytest.mark.parametrize(("overrides", "expected"), [
    ((), False),                                              # make run: the demo
    (("tracking=none", "hydra/launcher=serial", "replications=3", "sweep.force=true"), False),  # bookkeeping
    (("workload=swf", "workload.path=x.swf"), True),
    (("seed=50",), True),
    (("experiment=demo", "seed=50"), False),                  # the experiment was chosen
    (("experiment_name=mine", "cluster=hpc16"), False),
])
def test_adhoc_command_lines_get_their_own_experiment(overrides: tuple[str, ...], expected: bool) -> None:
    assert adhoc(multirun_config(*overrides)) is expected


def test_demo_table_is_not_polluted_by_adhoc_sweeps(tmp_path: Path) -> None:
    uri = [f"tracking.uri={sqlite_uri(tmp_path)}", f"tracking.artifact_root={tmp_path}/a"]
    drive([[*uri, "cluster=hpc16", *SYNTH, "seed=50"]])
    demo_cfg = compose("config", overrides=uri, return_hydra_config=True)
    assert task_config(demo_cfg)["experiment_name"] == "schedlab-demo"
    [run] = runs(sqlite_uri(tmp_path), ADHOC_EXPERIMENT)
    assert run.info.run_name == "easy seed=50 cluster=hpc16 jobs=300 arrival_rate=0.01"  # a single run: its overrides
    assert runs(sqlite_uri(tmp_path), "schedlab-demo") == []


def test_from_trace_without_a_trace_is_refused_before_any_run() -> None:
    cfg = compose("config", overrides=["cluster=from_trace"], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    run = Run.of(cfg)
    with pytest.raises(InvalidSweepError, match="cluster=from_trace takes the size from a trace header") as error:
        Planner().plan(multirun_config("cluster=from_trace"), [run])
    assert "(all 1 runs)" in str(error.value) and "cluster.nodes=N" in str(error.value)


def test_ray_sweep_of_a_trace_runs_once_per_cell(trace_dir: Path) -> None:
    """The one real Ray sweep here: 3 seeds of a replay → 1 run, said so, recorded once."""
    proc = sweep(trace_dir, "workload=swf", "workload.path=traces/x.swf", "cluster=from_trace", "policy=easy",
                 "seed=0,1,2")
    assert "1 done, 0 failed, 2 skipped" in proc.stdout
    assert "workload swf is deterministic: 3 seeds → 1 run per cell" in proc.stdout
    [run] = runs(sqlite_uri(trace_dir))
    assert run.info.run_name == "easy" and run.data.params["cluster.nodes"] == "16"
