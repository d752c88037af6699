"""A researcher's own policy, first class: swept against the baselines under its own name from a package
and a config folder of their own, rerun when edited, never pooled with another policy, and every mistake
one line.

The worked example ``examples/my_policy/`` is swept end to end through ``sweeps/run.py -m`` on a local
Ray (a copy of it, so the test can edit it); the labelling rules drive the tracker in this process;
bad policies go through ``sweeps/run.py`` as a user would run them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose
from hydra.core.hydra_config import HydraConfig

from analysis.runs import load_runs
from analysis.summary import analyse
from sweeps import task
from sweeps._hydra import group_choices, task_config
from sweeps.summary import format_policy_table
from tests.conftest import REPO
from tests.test_identity import EXPERIMENT, conf, drive, trace_dir, trace_runs  # noqa: F401 (fixtures)
from tests.test_sweeper import ENV, RUN, runs, sqlite_uri, two_node_cluster  # noqa: F401 (a fixture)

EXAMPLE = REPO / "examples" / "my_policy"
#: a loaded LIGO stream on 10 resources: the example's EDF and RM-DCWF's FIFO baseline differ
WORKFLOWS = ["workload=ligo", "cluster=rmdcwf", "cluster.m=10", "workload.arrival_rate=0.02", "workload.em_max=2",
             "workload.jobs=80", "workload.warmup=10", "hydra.launcher.local.object_store_memory=80000000",
             "hydra.launcher.progress=false"]
HELPERS = REPO / "tests"  # tests/policy_helpers.py, importable as policy_helpers with this on PYTHONPATH


def run_cli(cwd: Path, *args: str, pythonpath: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**ENV, "PYTHONPATH": str(pythonpath)} if pythonpath else ENV
    return subprocess.run([sys.executable, str(RUN), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture()
def example(tmp_path: Path) -> Path:
    """A copy of ``examples/my_policy`` (package ``mysched`` and config folder ``myconf``)."""
    copy = tmp_path / "my_policy"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def example_sweep(cwd: Path, example: Path, *overrides: str) -> subprocess.CompletedProcess:
    proc = run_cli(cwd, "-m", f"hydra.searchpath=[file://{example}/myconf]", "policy=edf,fifo_workflow", "seed=0,1",
                   "experiment_name=mine", *WORKFLOWS, *overrides, pythonpath=example)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc


def test_the_example_policy_is_swept_under_its_name_and_rerun_when_edited(tmp_path: Path, example: Path) -> None:
    first = example_sweep(tmp_path, example)
    assert "4 done, 0 failed" in first.stdout
    table = {line.split()[0]: line.split()[1:] for line in first.stdout.splitlines()
             if line.split()[:1] in (["edf"], ["fifo_workflow"])}
    assert table.keys() == {"edf", "fifo_workflow"} and table["edf"][0] == table["fifo_workflow"][0] == "2"
    assert "#/experiments/" in first.stdout and "/runs?workflowType=machine_learning" in first.stdout
    before = runs(sqlite_uri(tmp_path), "mine")
    assert sorted(r.data.params["policy"] for r in before) == ["edf", "edf", "fifo_workflow", "fifo_workflow"]
    edf = [r for r in before if r.data.params["policy"] == "edf"]
    assert {r.data.params["policy._target_"] for r in edf} == {"mysched.edf.EdfWorkflow"}
    assert all("mysched/edf.py" in r.data.tags["schedlab.code_files"] for r in edf)
    assert all("mysched/" not in r.data.tags["schedlab.code_files"] for r in before if r not in edf)

    source = example / "mysched" / "edf.py"  # the researcher's edit: urgency = the workflow's deadline
    source.write_text(source.read_text().replace('if self.key == "deadline":', "if True:"))
    second = example_sweep(tmp_path, example)
    assert "2 done, 0 failed, 2 skipped" in second.stdout
    assert "2 reran: code changed: mysched/edf.py" in second.stdout
    after = runs(sqlite_uri(tmp_path), "mine")
    assert len(after) == 6 and {r.info.status for r in after} == {"FINISHED"}
    old = {r.data.params["seed"]: r.data.metrics["turnaround/mean"] for r in edf}
    new = {r.data.params["seed"]: r.data.metrics["turnaround/mean"] for r in after
           if r.data.params["policy"] == "edf" and r.info.run_id not in {e.info.run_id for e in edf}}
    assert old.keys() == new.keys() and old != new  # the edit's numbers, not the old ones

    report = subprocess.run([sys.executable, str(REPO / "analysis" / "report.py"), "--experiment", "mine",
                             "--tracking-uri", sqlite_uri(tmp_path), "--table-only", "--metrics",
                             "late/proportion,turnaround/mean"], cwd=tmp_path, env=ENV, capture_output=True,
                            text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert "2 superseded by a later run of the same run key" in report.stdout
    assert "turnaround/mean (s): edf" in report.stdout and "turnaround/mean (s): fifo_workflow" in report.stdout


def test_the_example_easy_variant_is_one_yaml(conf: None, example: Path) -> None:  # noqa: F811
    """``myconf/policy/easy_sjf.yaml``: schedlab's EASY class with SJF backfilling, no Python."""
    search = f"hydra.searchpath=[file://{example}/myconf]"
    shrink = ["workload.jobs=400", "workload.arrival_rate=0.02", "cluster=hpc16", "seed=3"]
    sjf = compose("config", overrides=[search, "policy=easy_sjf", *shrink], return_hydra_config=True)
    assert group_choices(sjf)["policy"] == "easy_sjf" and sjf.policy.backfill_order == "sjf"
    easy = compose("config", overrides=[search, "policy=easy", *shrink], return_hydra_config=True)
    assert sjf.policy._target_ == easy.policy._target_
    summaries = []
    for cfg in (sjf, easy):
        HydraConfig.instance().set_config(cfg)
        summaries.append(task.run_one(task_config(cfg)).summary)
    assert summaries[0] != summaries[1]


def own_conf(folder: Path, **policies: str) -> str:
    """A researcher's config folder with ``policy/NAME.yaml`` naming each target; its search-path override."""
    (folder / "policy").mkdir(parents=True, exist_ok=True)
    for name, target in policies.items():
        (folder / "policy" / f"{name}.yaml").write_text(f"_target_: {target}\n")
    return f"hydra.searchpath=[file://{folder}]"


def test_two_classes_under_one_name_never_share_a_cell(conf: None, trace_dir: Path) -> None:  # noqa: F811
    """``mine`` names tests.policy_helpers.FirstFit in one sweep, then (the yaml's target edited) its copy
    FirstFitCopy: identical numbers, yet the edited policy reruns and the report keeps two columns."""
    classes = ("tests.policy_helpers.FirstFit", "tests.policy_helpers.FirstFitCopy")
    for target in classes:
        search = own_conf(trace_dir / "myconf", mine=target)
        decisions, tracker = drive([[*row, search] for row in trace_runs(trace_dir, policies=("mine", "easy"))])
    assert decisions[0] is None and decisions[1] is not None  # the edited yaml reruns, easy is reused
    assert [label for label, _, _ in tracker.results] == ["easy", "mine"]
    found = runs(sqlite_uri(trace_dir), EXPERIMENT)
    assert sorted(r.data.params["policy"] for r in found) == ["easy", "mine", "mine"]
    a = analyse(load_runs(EXPERIMENT, sqlite_uri(trace_dir)), metrics=["wait/mean"])
    assert a.levels == ["easy", *(f"mine class={c}" for c in classes)]
    assert any("'mine' holds 2 different configurations (policy._target_)" in note for note in a.notes)
    assert set(a.summary["n"]) == {1}  # one run per cell: nothing pooled


def test_a_target_override_beside_a_policy_axis_is_labelled_by_its_class(
        conf: None, trace_dir: Path) -> None:  # noqa: F811
    """``policy=easy,conservative policy._target_=X``: X runs under X's name, never as "easy" or
    "conservative"; the options X gets from each file keep the two apart."""
    rows = [[*row, "policy._target_=tests.policy_helpers.AnyOptions"]
            for row in trace_runs(trace_dir, policies=("easy", "conservative"))]
    decisions, tracker = drive(rows)
    assert decisions == [None, None] and [tracker.runs[i].policy for i in (0, 1)] == ["AnyOptions", "AnyOptions"]
    assert sorted(r.data.params["policy"] for r in runs(sqlite_uri(trace_dir), EXPERIMENT)) == ["AnyOptions"] * 2
    table = format_policy_table(tracker.results).splitlines()
    assert [line.split()[:2] for line in table[1:]] == [["AnyOptions", "window=ahead"], ["AnyOptions", "window=head"]]


@pytest.mark.parametrize(("overrides", "message"), [
    (["policy._target_=nosuch.Mine"], "cannot import policy nosuch.Mine: No module named 'nosuch'"),
    (["policy._target_=policy_helpers.NoSchedule"], "policy policy_helpers.NoSchedule lacks schedule()"),
    (["policy._target_=policy_helpers.FirstFit"], "policy policy_helpers.FirstFit does not accept option"),
    (["+policy.speed=3"], "does not accept option 'speed'"),
    (["policy.backfill_order=random"], "unknown backfill order 'random'"),
    (["policy=overcommit"], "the run failed: SchedulingError: Overcommit: job"),
    (["policy=idle"], "the run failed: SchedulingError: Idle: 50 jobs never started"),
])
def test_a_bad_policy_is_one_line(tmp_path: Path, overrides: list[str], message: str) -> None:
    search = own_conf(tmp_path / "myconf", overcommit="policy_helpers.Overcommit", idle="policy_helpers.Idle")
    proc = run_cli(tmp_path, search, "workload.jobs=50", "seed=1", "tracking=none", *overrides, pythonpath=HELPERS,
                   timeout=120)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and "HYDRA_FULL_ERROR" not in proc.stderr


@pytest.mark.parametrize("launcher", ["ray", "serial"])
def test_a_policy_stuck_in_its_own_code_is_stopped_by_the_run_timeout(tmp_path: Path, launcher: str) -> None:
    """A policy looping inside ``schedule`` (no wake-up for the engine to judge) is stopped once its run has taken
    ``hydra.launcher.run_timeout`` seconds: the run is recorded FAILED with that reason and the sweep's other run
    finishes."""
    search = own_conf(tmp_path / "myconf", stuck="policy_helpers.Stuck")
    tic = time.monotonic()
    proc = run_cli(tmp_path, "-m", search, "policy=stuck,fcfs", "workload.jobs=50", "seed=1",
                   f"hydra/launcher={launcher}", "hydra.launcher.run_timeout=2", "hydra.launcher.progress=false",
                   "experiment_name=stuck", pythonpath=HELPERS, timeout=180)
    assert proc.returncode != 0 and time.monotonic() - tic < 120
    assert "1 done, 1 failed" in proc.stdout
    assert "RunTimeoutError: the run took longer than hydra.launcher.run_timeout=2 s (wall clock)" in proc.stdout
    found = {r.data.params["policy"]: r for r in runs(sqlite_uri(tmp_path), "stuck")}
    assert found["fcfs"].info.status == "FINISHED" and found["stuck"].info.status == "FAILED"
    assert "run_timeout=2 s" in found["stuck"].data.tags["schedlab.error"]


def test_a_run_timeout_that_is_not_a_positive_number_is_refused(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "-m", "seed=1", "hydra/launcher=serial", "hydra.launcher.run_timeout=-1", "tracking=none")
    assert proc.returncode != 0 and "hydra.launcher.run_timeout must be a positive number of seconds" in proc.stderr


def test_a_worker_that_cannot_import_the_policy_fails_its_run_in_one_line(tmp_path: Path, example: Path) -> None:
    """The driver imports the researcher's package; Ray workers whose environment lacks it (here: their
    PYTHONPATH pointed elsewhere) fail each run with the loader's line, and the sweep ends — no hang."""
    proc = run_cli(tmp_path, "-m", f"hydra.searchpath=[file://{example}/myconf]", "policy=edf", "seed=0",
                   "experiment_name=mine", *WORKFLOWS, "+hydra.launcher.init.runtime_env.env_vars.PYTHONPATH=/nowhere",
                   pythonpath=example)
    assert proc.returncode != 0
    assert "0 done, 1 failed" in proc.stdout
    assert "cannot import policy mysched.edf.EdfWorkflow: No module named 'mysched'" in proc.stdout
    [run] = runs(sqlite_uri(tmp_path), "mine")
    assert run.info.status == "FAILED" and "No module named 'mysched'" in run.data.tags["schedlab.error"]


@pytest.mark.slow
@pytest.mark.cluster
def test_a_cluster_started_elsewhere_gets_the_package_shipped(
        two_node_cluster: str, tmp_path: Path, example: Path) -> None:  # noqa: F811
    """Nodes started without the researcher's package (``ray start`` in another environment) import it from
    what the driver ships with ``runtime_env.py_modules``."""
    proc = example_sweep(tmp_path, example, f"hydra.launcher.address={two_node_cluster}")
    assert "4 done, 0 failed" in proc.stdout
    assert len({r.data.tags["schedlab.ray_node"] for r in runs(sqlite_uri(tmp_path), "mine")}) == 2

