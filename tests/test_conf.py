"""The real ``conf/`` composes, every option validates, and bad values fail before anything runs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf

from sim.core import InputError
from sweeps import task
from sweeps._hydra import task_config
from sweeps.tracking import flatten, run_key
from tests.conftest import REPO

CONF = REPO / "conf"
SHRINK = ["workload.jobs=200"]


@pytest.fixture(autouse=True)
def hydra_conf() -> Iterator[None]:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield
    GlobalHydra.instance().clear()


def load(*overrides: str) -> DictConfig:
    cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)  # so ${hydra:runtime.cwd} resolves as in a real run
    return cfg


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_defaults_list_reads_like_a_table_of_contents() -> None:
    defaults = OmegaConf.load(CONF / "config.yaml").defaults
    groups = [next(iter(d)) for d in defaults if isinstance(d, dict | DictConfig)]
    assert groups == ["cluster", "workload", "policy", "tracking", "hydra", "experiment"]


def test_default_config_is_the_demo_on_the_ray_launcher() -> None:
    cfg = load()
    assert cfg.hydra.launcher._target_.endswith("RayLauncher") and cfg.hydra.launcher.address == "local"
    assert cfg.hydra.sweeper._target_.endswith(".BasicSweeper")  # Hydra's own: the launcher plans
    assert cfg.hydra.callbacks.schedlab._target_ == "sweeps.callback.SchedlabCallback"  # hands it the planner
    assert cfg.hydra.sweeper.params.policy == "easy,conservative"
    assert cfg.hydra.sweeper.params.seed == "range(0,5)"  # replications of the experiment
    plain = task_config(cfg)
    assert plain["experiment_name"] == "schedlab-demo"
    assert plain["tracking"]["uri"] == f"sqlite:///{Path.cwd()}/mlflow.db"


MULTI_RESOURCE = ("cluster=drf_pool", "workload=multires3")
WORKFLOWS = ("cluster=rmdcwf", "workload=ligo", "workload.jobs=20", "workload.warmup=2")


@pytest.mark.parametrize("policy", options("policy"))
def test_every_policy_option_composes_and_validates(policy: str) -> None:
    """Each policy validates with the cluster and workload of its family, and is refused by the others."""
    fits, refusals = [], []
    for companion in (SHRINK, MULTI_RESOURCE, WORKFLOWS):
        plain = task_config(load(f"policy={policy}", *companion))
        try:
            task.prepare(plain)
            fits.append(companion)
        except InputError as error:
            refusals.append(str(error))
    assert len(fits) >= 1 and "name" not in plain["policy"]  # the label is the config choice
    assert all(("does not fit cluster" in e or "workloads, not" in e) for e in refusals)


@pytest.mark.parametrize(("overrides", "message"), [
    (["policy=easy", *WORKFLOWS], "policy 'easy' schedules hpc or multires workloads, not workflow workloads"),
    (["policy=rmdcwf", "cluster=rmdcwf"], "policy 'rmdcwf' schedules workflow workloads, not hpc workloads"),
    (["policy=rmdcwf", "workload=ligo"],
     "needs a slotted cluster (m identical resources of c_r slots each: cluster=rmdcwf)"),
])
def test_a_policy_of_another_workload_family_is_refused_on_the_driver(overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        task.prepare(task_config(load(*overrides)))


@pytest.mark.parametrize("workload", ["cybershake", "ligo", "genome"])
def test_every_workflow_workload_runs_end_to_end(workload: str) -> None:
    outcome = task.run_one(task_config(load("policy=rmdcwf", *WORKFLOWS, f"workload={workload}", "seed=2")))
    assert outcome.summary["jobs"] == 18
    assert {"late/proportion", "turnaround/mean", "overhead/mean_s", "util", "load/offered",
            "remap/attempts"} <= set(outcome.summary)
    assert set(outcome.tables) == {"workflows"} and outcome.files == {}  # the task table only when asked


def test_a_workflow_run_saves_its_task_table_when_asked(tmp_path: Path) -> None:
    import io

    import numpy as np
    import pyarrow.parquet as pq

    from sim.policies import policy_from_conf
    from sim.run import run
    from sim.workflows.metrics import TASK_COLUMNS, TaskTable

    cfg = task_config(load("policy=rmdcwf", *WORKFLOWS, "workload=ligo", "workload.save_tasks=true", "seed=2"))
    outcome = task.run_one(cfg)
    assert set(outcome.files) == {"tasks.parquet"}
    parts = task.prepare(cfg)
    cluster = parts.cluster.build()
    tasks = TaskTable()
    run(parts.workload.build(np.random.default_rng(2), cluster), cluster, policy_from_conf("rmdcwf"), tasks=tasks)
    assert pq.read_table(io.BytesIO(outcome.files["tasks.parquet"])).to_pydict() == tasks.columns
    writer = task.ParquetRows(tmp_path / "t.parquet", TASK_COLUMNS, batch=300)  # several row groups
    for row in zip(*tasks.columns.values(), strict=True):
        writer(row)
    assert pq.read_table(writer.close()).to_pydict() == tasks.columns
    assert pq.ParquetFile(tmp_path / "t.parquet").metadata.num_row_groups == -(-len(tasks.columns["job_id"]) // 300)


def test_backfilling_on_a_multi_resource_cluster_fails_before_running() -> None:
    with pytest.raises(InputError, match=r"policy 'easy' does not fit cluster .*'cpu': 32.0, 'mem': 128.0"):
        task.prepare(task_config(load("policy=easy", *MULTI_RESOURCE)))


def test_a_drf_run_logs_fairness_metrics_and_the_share_timeline() -> None:
    outcome = task.run_one(task_config(load("policy=drf_weighted", *MULTI_RESOURCE, "seed=1")))
    assert {"fairness/jain", "util/cpu", "util/mem", "share/A/mean"} <= set(outcome.summary)
    timeline = outcome.tables["dominant_shares"]
    assert set(timeline) == {"time", "user", "dominant_share"} and set(timeline["user"]) == {"A", "B", "C"}


def test_every_policy_file_targets_a_simulator_class_or_factory() -> None:
    targets = [OmegaConf.load(CONF / "policy" / f"{p}.yaml")._target_ for p in options("policy")]
    assert all(t.startswith("sim.policies.") and t.count(".") == 3 for t in targets), targets


def test_a_multi_resource_run_builds_from_specs() -> None:
    """The shape a DRF config takes: a ResourceCluster, a MultiResTasks workload, a fair-share policy."""
    plain = task_config(load("seed=1"))
    plain["cluster"] = {"_target_": "sweeps.specs.ResourceCluster", "resources": {"cpu": 9, "mem": 18}}
    plain["workload"] = {"_target_": "sweeps.specs.MultiResTasks", "users": {
        "A": {"demand": [1, 4], "tasks": 20, "duration": 10}, "B": {"demand": [3, 1], "tasks": 20, "duration": 10}}}
    plain["policy"] = {"_target_": "sim.policies.fair_share.FairShare", "rule": "drf"}
    outcome = task.run_one(plain)
    assert outcome.summary["jobs"] == 40 and "util/cpu" in outcome.summary


@pytest.mark.parametrize("cluster", [c for c in options("cluster") if c != "from_trace"])
@pytest.mark.parametrize("tracking", options("tracking"))
def test_cluster_and_tracking_options_compose(cluster: str, tracking: str) -> None:
    companion = {"drf": ["workload=multires3", "policy=drf"], "rmdcwf": ["workload=ligo", "policy=rmdcwf"]}
    extra = next((v for k, v in companion.items() if cluster.startswith(k)), [])
    task.prepare(task_config(load(f"cluster={cluster}", f"tracking={tracking}", *extra)))


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_composes_with_its_sweep_axes(experiment: str) -> None:
    cfg = load(f"experiment={experiment}")
    task.prepare(task_config(cfg))
    if cfg.hydra.runtime.choices.get("hydra/sweeper") == "precision":  # it chooses the seeds itself
        assert "seed" not in (cfg.hydra.sweeper.params or {}) and cfg.hydra.sweeper.initial >= 2
    else:
        assert "seed" in cfg.hydra.sweeper.params and cfg.replications >= 1


@pytest.mark.parametrize("fmt", ["swf", "drevt_csv"])
def test_trace_workloads_read_relative_paths_from_the_launch_directory(fmt: str, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_submit_time,num_nodes,time_limit\n0,4,100\n")
    plain = task_config(load(f"workload={fmt}", f"workload.path={trace}", "cluster.nodes=8"))
    assert task.prepare(plain).workload.file == trace


@pytest.mark.parametrize(("overrides", "message"), [
    (["workload.arrival_rate=-1"], "arrival_rate must be a positive"),
    (["workload.arrival_rate=0"], "arrival_rate must be a positive"),
    (["policy._target_=nosuch.Policy"], "cannot import policy nosuch.Policy"),
    (["policy.order=random"], "unknown queue order"),
    (["cluster.nodes=0"], "cluster.nodes must be a positive"),
    (["workload=swf", "workload.path=missing.swf"], "Parallel Workloads Archive"),
    (["workload=drevt_csv"], "workload.path is required"),
    (["+seed_typo=3"], "unknown top-level config key"),
    (["+workload.arival_rate=3"], "unexpected keyword argument 'arival_rate'"),
])
def test_invalid_values_are_reported_clearly(overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        task.prepare(task_config(load(*overrides)))


@pytest.mark.parametrize("overrides", [["policy=nosuch"], ["workload.arival_rate=3"], ["tracking=postgres"]])
def test_unknown_options_and_misspelled_keys_fail_composition(overrides: list[str]) -> None:
    with pytest.raises(ConfigCompositionException):
        load(*overrides)


def test_run_key_ignores_non_semantic_keys_only() -> None:
    base = task_config(load(*SHRINK))
    keys = base["sweep"]["non_semantic"]  # conf/config.yaml's
    key = run_key(base, keys)
    assert run_key(task_config(load(*SHRINK, "tracking=none", "experiment_name=x", "sweep.force=true")),
                   keys) == key
    for change in ["seed=1", "policy=conservative", "policy.order=sjf", "workload.arrival_rate=0.002",
                   "cluster=hpc16", "engine.kill_at_limit=true"]:
        assert run_key(task_config(load(*SHRINK, change)), keys) != key, change


def test_params_are_the_flattened_config_with_dotted_keys() -> None:
    params = flatten(task_config(load()))
    assert {"policy._target_", "policy.order", "workload.arrival_rate", "cluster.nodes", "seed"} <= set(params)
    assert not any(k.startswith("hydra") for k in params)
    assert all(len(str(v)) < 6000 for v in params.values())


def test_same_seed_same_metrics_and_same_jobs_for_every_policy() -> None:
    first = task.run_one(task_config(load(*SHRINK, "seed=4")))
    again = task.run_one(task_config(load(*SHRINK, "seed=4")))
    other = task.run_one(task_config(load(*SHRINK, "seed=4", "policy=conservative")))
    assert first.summary == again.summary and first.tables == again.tables
    for column in ("job_id", "submit_time", "nodes", "time_limit"):
        assert first.tables["jobs"][column] == other.tables["jobs"][column]
    fifth = task.run_one(task_config(load(*SHRINK, "seed=5")))
    assert fifth.tables["jobs"]["submit_time"] != first.tables["jobs"]["submit_time"]
