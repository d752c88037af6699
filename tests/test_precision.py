"""The sequential-precision sweeper (``hydra/sweeper=precision``) and its statistics (analysis/precision.py).

The procedure is checked on samples whose mean is known (coverage over many repetitions) and end to
end on an M/M/c queue, whose mean wait has a closed form (Erlang C). Sweeps run in this process
through Hydra's own sweep runner (``hydra.test_utils``) and the basic launcher; a killed driver's
resume and the Ray launcher run ``sweeps/run.py -m`` in a subprocess.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf
from scipy import stats

from hydra_plugins.schedlab_precision_sweeper._core import Job, PrecisionSweep
from hydra_plugins.schedlab_precision_sweeper.precision_sweeper import PrecisionSweeper
from sim import precision as pr
from sim.workloads.synthetic import erlang_c_wait
from sweeps._hydra import task_config
from sweeps.record import RunResult
from sweeps.task import RunOutcome, run_one
from tests.test_sweeper import ENV, RUN, kill_tree, runs, sqlite_uri

MMC = ["workload=mmc", "cluster=hpc16", "cluster.nodes=4", "policy=fcfs", "workload.jobs=1000"]
WAIT = pr.Target("wait/mean", relative=0.1)
#: two M/M/4 loads to ±5 % on turnaround/mean from 3 seeds, 3 more a round: ρ = 0.25 is met at 3
#: seeds (±2 % measured), ρ = 0.875 is not before 30 (±10 % at 30), so it runs to the cap
TWO_LOADS = ["hydra/sweeper=precision", *MMC[:-1], "workload.jobs=300", "workload.arrival_rate=0.01,0.035",
             "experiment_name=precision-two-loads", "hydra.sweep.dir=multirun",
             "hydra.sweeper.metrics=[turnaround/mean]", "hydra.sweeper.relative_halfwidth=0.05",
             "hydra.sweeper.initial=3", "hydra.sweeper.batch=3"]
LOW, HIGH = "workload.arrival_rate=0.01", "workload.arrival_rate=0.035"


# -- the procedure on samples with a known mean ---------------------------------------------------------
def sequential(rng: np.random.Generator, rule: pr.Rule, draw: Any) -> pr.Verdict:
    """Run the procedure on one cell whose replications are ``draw(rng)``; return its last verdict."""
    cell = pr.Cell()
    while (verdict := pr.judge(cell, rule)).more:
        for seed in range(cell.tried, cell.tried + verdict.more):
            cell.results[seed] = {"x": float(draw(rng))}
    return verdict


def test_intervals_cover_the_true_mean_at_about_the_nominal_rate() -> None:
    """1,000 sequential procedures on Gamma(9) replications (mean 10, CV 1/3, skewed like per-run
    means) to ±15 %: every one stops within target, and the count of 95 % intervals covering 10
    lies in a binomial acceptance band. Sequential stopping costs some coverage (Law & Kelton;
    0.93-0.95 measured on such data), so the band is [the 0.5 % quantile at coverage 0.92, the
    99.5 % quantile at 0.95]: a procedure with true coverage in [0.92, 0.95] fails with probability
    ≤ 1 % (and the seed fixes the outcome)."""
    rule = pr.Rule((pr.Target("x", relative=0.15),), initial=5, batch=5, max_replications=2000)
    rng = np.random.default_rng(2026)
    verdicts = [sequential(rng, rule, lambda r: r.gamma(9.0, 10 / 9)) for _ in range(1000)]
    assert {v.status for v in verdicts} == {pr.MET}
    assert all(v.metrics[0].half_width <= 0.15 * abs(v.metrics[0].mean) for v in verdicts)
    covered = sum(abs(v.metrics[0].mean - 10.0) <= v.metrics[0].half_width for v in verdicts)
    low, high = stats.binom(1000, 0.92).ppf(0.005), stats.binom(1000, 0.95).isf(0.005)
    assert low <= covered <= high, (low, covered, high)


def test_a_settled_cell_gets_no_more_runs_and_a_noisy_one_does() -> None:
    rule = pr.Rule((WAIT,), initial=3, batch=4, max_replications=20)
    settled = pr.judge(pr.Cell({s: {"wait/mean": 100.0 + s % 2} for s in range(3)}), rule)
    noisy = pr.judge(pr.Cell({s: {"wait/mean": 100.0 * (s + 1)} for s in range(3)}), rule)
    assert (settled.status, settled.more) == (pr.MET, 0)
    assert (noisy.status, noisy.more) == (pr.RUNNING, 4)


def test_a_cell_at_the_cap_is_flagged_never_met() -> None:
    rule = pr.Rule((WAIT,), initial=3, batch=4, max_replications=5)
    verdict = pr.judge(pr.Cell({s: {"wait/mean": 100.0 * (s + 1)} for s in range(5)}), rule)
    assert (verdict.status, verdict.more) == (pr.CAPPED, 0)
    table = pr.table({"policy=easy": verdict})
    header, row, note = table.splitlines()
    assert (header.split()[-1], row.split()[-1]) == ("status", "CAPPED")
    assert note.startswith("NOT within target: 1 cell(s)")


def completed(value: Any) -> JobReturn:
    ret = JobReturn(status=JobStatus.COMPLETED)
    ret.return_value = value
    return ret


def test_each_kind_of_result_is_filed_as_what_it_is() -> None:
    """A run made now and one recorded before give their metrics (a launcher that records nothing: the
    task's outcome), a failure counts failed, and a seed another live sweep runs is left to it: tried, not
    failed. A replay's seeds repeat its one run: the cell is deterministic, the repeats are not results."""
    sweep, cell, replay = PrecisionSweep(metrics=["wait/mean"], relative_halfwidth=0.05), pr.Cell(), pr.Cell()
    failed = JobReturn(status=JobStatus.FAILED)
    failed.return_value = RuntimeError("boom")
    results = [completed(RunOutcome({"wait/mean": 3.0}, {})),
               completed(RunResult({"wait/mean": 5.0, "jobs": 9.0}, "finished in MLflow run r1", "r1")),
               completed(RunResult({"wait/mean": 4.0}, run_id="r2")), failed,
               completed(RunResult(reason="running in another sweep: s", elsewhere="s"))]
    sweep._take({"c": cell}, [Job("c", seed) for seed in range(5)], results)
    assert cell.results == {0: {"wait/mean": 3.0}, 1: {"wait/mean": 5.0}, 2: {"wait/mean": 4.0}}
    assert cell.failed == {3} and cell.elsewhere == {4} and cell.tried == 5 and not cell.deterministic
    once = [completed(RunResult({"wait/mean": 7.0}, run_id="r3", stochastic=False)),
            completed(RunResult({"wait/mean": 7.0}, "same run as #0", "r3", same_as=0, stochastic=False))]
    sweep._take({"c": replay}, [Job("c", seed) for seed in range(2)], once)
    assert replay.deterministic and replay.results == {0: {"wait/mean": 7.0}}
    assert pr.judge(replay, sweep.rule).status == pr.DETERMINISTIC


def test_failed_runs_are_counted_and_stop_the_cell() -> None:
    rule = pr.Rule((WAIT,), initial=3, batch=2, max_replications=50, max_failures=2)
    once = pr.judge(pr.Cell({0: {"wait/mean": 1.0}}, failed={1}), rule)
    assert (once.status, once.more, once.failed) == (pr.RUNNING, 2, 1)  # seeds 2, 3 next: 1 is not retried
    twice = pr.judge(pr.Cell({0: {"wait/mean": 1.0}}, failed={1, 2}), rule)
    assert (twice.status, twice.more) == (pr.FAILING, 0)


def test_a_deterministic_workload_needs_one_run() -> None:
    rule = pr.Rule((WAIT,))
    assert pr.judge(pr.Cell(deterministic=True), rule).more == 1
    done = pr.judge(pr.Cell({0: {"wait/mean": 5.0}}, deterministic=True), rule)
    assert (done.status, done.more, done.metrics[0].n) == (pr.DETERMINISTIC, 0, 1)
    assert pr.judge(pr.Cell(failed={0}, deterministic=True), rule).status == pr.FAILING


def test_paired_mode_settles_the_difference_with_fewer_runs() -> None:
    """Common random numbers: both policies share the seed's large effect (sd 50 around means 200
    and 240), so their difference (40 ± 1.4) is within 5 % long before either mean is; the baseline
    runs exactly the seeds its comparator needs."""
    rng = np.random.default_rng(7)
    seed_effect, noise = rng.normal(0, 50, 400), rng.normal(0, 1, (2, 400))
    values = {"easy": 200 + seed_effect + noise[0], "cons": 240 + seed_effect + noise[1]}
    rule = pr.Rule((WAIT,), initial=5, batch=5, max_replications=400)

    def until_done(baseline_of: dict[str, str | None]) -> dict[str, pr.Verdict]:
        cells = {name: pr.Cell() for name in values}
        while True:
            verdicts = pr.judge_paired(cells, baseline_of, rule)
            if not any(v.more for v in verdicts.values()):
                return verdicts
            for name, verdict in verdicts.items():
                for seed in range(cells[name].tried, cells[name].tried + verdict.more):
                    cells[name].results[seed] = {"wait/mean": float(values[name][seed])}

    alone = until_done({"easy": None, "cons": None})
    paired = until_done({"easy": None, "cons": "easy"})
    assert alone["cons"].status == paired["cons"].status == pr.MET
    assert (paired["easy"].status, paired["cons"].baseline) == (pr.BASELINE, "easy")
    assert paired["easy"].tried == paired["cons"].tried == rule.initial < alone["cons"].tried


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"targets": ()}, "name at least one metric"),
    ({"initial": 1}, "initial must be ≥ 2"),
    ({"max_replications": 3}, "max_replications (3) must be ≥ initial (5)"),
    ({"confidence": 95}, "confidence must lie in (0, 1)"),
])
def test_bad_rules_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(pr.RuleError, match=None) as error:
        pr.Rule(**{"targets": (WAIT,), **kwargs})
    assert message in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(pr.RuleError, match="relative_halfwidth and/or absolute_halfwidth"):
        pr.Target("wait/mean")


# -- the sweeper, in this process ----------------------------------------------------------------------
def test_discovery() -> None:
    assert PrecisionSweeper.__name__ in [p.__name__ for p in Plugins.instance().discover(Sweeper)]


def simulate(cfg: DictConfig) -> RunOutcome:
    return run_one(task_config(cfg))


def precision_sweep(runner: Any, tmp: Path, *overrides: str, task: Any = simulate) -> dict[str, pr.Verdict]:
    """A precision sweep of the repo's conf on Hydra's basic launcher; its verdicts (precision.json)."""
    sweep = runner(calling_file=str(RUN), calling_module=None, task_function=task, config_path="../conf",
                   config_name="config", overrides=["hydra/sweeper=precision", "hydra/launcher=serial", *overrides],
                   temp_dir=tmp)
    with sweep:  # the runner deletes its sweep directory on exit
        return pr.load(tmp / "precision.json")[0]


def test_mmc_sweep_stops_within_target_and_covers_erlang_c(hydra_sweep_runner: Any, tmp_path: Path) -> None:
    """Two loads of an M/M/4 queue to ±10 %: each cell stops on its own within target, and its CI
    holds the closed-form mean wait up to twice its half-width (a miss that large has probability
    ≈ 0.3 % per cell for a t interval; the transient of a 1,000-job run from empty biases the mean
    well inside that: 50.89 s over 40 seeds of 4,000 jobs at ρ = 0.75 against 50.94 s)."""
    verdicts = precision_sweep(hydra_sweep_runner, tmp_path, *MMC, "tracking=none",
                               "workload.arrival_rate=0.02,0.03",
                               "hydra.sweeper.relative_halfwidth=0.1", "hydra.sweeper.max_replications=80")
    assert set(verdicts) == {"workload.arrival_rate=0.02", "workload.arrival_rate=0.03"}
    for cell, verdict in verdicts.items():
        [wait] = verdict.metrics
        assert verdict.status == pr.MET and wait.half_width <= 0.1 * wait.mean, cell
        truth = erlang_c_wait(4, float(cell.split("=")[1]), 100.0)
        assert abs(wait.mean - truth) <= 2 * wait.half_width, (cell, wait, truth)
        assert verdict.tried == wait.n >= 5
    assert len({v.tried for v in verdicts.values()}) == 2  # each cell stopped on its own


def test_failing_runs_are_recorded_and_stop_their_cell(hydra_sweep_runner: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """CONSERVATIVE fails at every seed, EASY at seed 2: the sweep ends, each failure is a FAILED
    MLflow run, CONSERVATIVE stops after max_failures runs, EASY carries on past seed 2."""
    def flaky(cfg: DictConfig) -> RunOutcome:
        if HydraConfig.get().runtime.choices.policy == "conservative" or cfg.seed == 2:
            raise RuntimeError(f"injected failure at seed {cfg.seed}")
        return simulate(cfg)

    monkeypatch.chdir(tmp_path)
    verdicts = precision_sweep(hydra_sweep_runner, tmp_path / "multirun", *MMC, "experiment_name=flaky",
                               "policy=easy,conservative", "hydra.sweeper.initial=3",
                               "hydra.sweeper.batch=2", "hydra.sweeper.max_failures=3",
                               "hydra.sweeper.relative_halfwidth=0.5", task=flaky)
    assert (verdicts["policy=conservative"].status, verdicts["policy=conservative"].tried) == (pr.FAILING, 3)
    easy = verdicts["policy=easy"]
    assert easy.failed == 1 and easy.status == pr.MET and easy.metrics[0].n == easy.tried - 1 >= 3
    status = Counter((r.data.params["policy"], r.info.status) for r in runs(sqlite_uri(tmp_path), "flaky"))
    assert status == {("conservative", "FAILED"): 3, ("easy", "FAILED"): 1, ("easy", "FINISHED"): easy.tried - 1}

    # the same sweep again: finished runs are skipped and read back from MLflow, failed ones retried
    again = precision_sweep(hydra_sweep_runner, tmp_path / "multirun", *MMC, "experiment_name=flaky",
                            "policy=easy,conservative", "hydra.sweeper.initial=3",
                            "hydra.sweeper.batch=2", "hydra.sweeper.max_failures=3",
                            "hydra.sweeper.relative_halfwidth=0.5", task=flaky)
    assert again == verdicts
    status = Counter((r.data.params["policy"], r.info.status) for r in runs(sqlite_uri(tmp_path), "flaky"))
    assert status == {("conservative", "FAILED"): 6, ("easy", "FAILED"): 2, ("easy", "FINISHED"): easy.tried - 1}


def test_rounds_are_hydra_batches_with_distinct_jobs(hydra_sweep_runner: Any, tmp_path: Path) -> None:
    """BatchedSweeperTestSuite's checks where they apply: ``sweep.returns`` holds one batch per
    round (6 runs, then 3 for the cell still running), job numbers and output directories run on
    across rounds, each job's overrides are its cell's plus its seed, ``multirun.yaml`` records the
    command line."""
    task = [*MMC[:-1], "workload.jobs=300", "workload.arrival_rate=0.01,0.035", "tracking=none",
            "hydra.sweeper.metrics=[turnaround/mean]", "hydra.sweeper.relative_halfwidth=0.05",
            "hydra.sweeper.initial=3", "hydra.sweeper.batch=3", "hydra.sweeper.max_replications=6"]
    sweep = hydra_sweep_runner(calling_file=str(RUN), calling_module=None, task_function=simulate,
                               config_path="../conf", config_name="config",
                               overrides=["hydra/sweeper=precision", "hydra/launcher=serial", *task], temp_dir=tmp_path)
    with sweep:
        assert [len(batch) for batch in sweep.returns] == [6, 3]
        flat = [ret for batch in sweep.returns for ret in batch]
        assert [ret.hydra_cfg.hydra.job.num for ret in flat] == list(range(9))
        assert len({ret.hydra_cfg.hydra.runtime.output_dir for ret in flat}) == 9
        high = [(HIGH in ret.overrides, ret.overrides[-1]) for ret in flat[3:]]
        assert high == [(True, f"seed={s}") for s in range(6)]
        assert OmegaConf.load(tmp_path / "multirun.yaml").hydra.overrides.task == [
            o for o in task if not o.startswith("hydra.")]


def test_seed_axis_and_unknown_metric_are_refused(hydra_sweep_runner: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="chooses the seeds") as error:
        precision_sweep(hydra_sweep_runner, tmp_path, *MMC, "tracking=none", "seed=0,1")
    assert "remove 'seed=0,1'" in str(error.value)
    with pytest.raises(Exception, match="'wait/avg' is not a metric of run") as error:
        precision_sweep(hydra_sweep_runner, tmp_path, *MMC, "tracking=none", "hydra.sweeper.metrics=[wait/avg]")
    assert "wait/mean" in str(error.value)


# -- the sweeper, through sweeps/run.py in a subprocess ---------------------------------------------------
def run_sweep(cwd: Path, *overrides: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """``python sweeps/run.py -m TWO_LOADS… overrides…`` in ``cwd``; fails the test on a non-zero exit."""
    proc = subprocess.run([sys.executable, str(RUN), "-m", *TWO_LOADS, *overrides], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"sweep failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc


def finished_in(db: Path) -> int:
    """FINISHED runs in an MLflow SQLite store another process is writing (0 before it has tables)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
            return int(con.execute("SELECT COUNT(*) FROM runs WHERE status = 'FINISHED'").fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_killed_driver_resumes_without_duplicates_to_the_clean_table(tmp_path: Path) -> None:
    """SIGKILL the driver of a 12-run precision sweep (basic launcher) once 4 runs are recorded; the
    same command again finishes, each (cell, seed) has one FINISHED run, and the table is that of
    an uninterrupted sweep. Slow: a new MLflow SQLite store takes ~10 s to create here."""
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    killed.mkdir(), clean.mkdir()
    cap = ["hydra/launcher=serial", "hydra.sweeper.max_replications=9"]
    driver = subprocess.Popen([sys.executable, str(RUN), "-m", *TWO_LOADS, *cap], cwd=killed, env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while finished_in(killed / "mlflow.db") < 4 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        kill_tree(driver.pid)
    before = finished_in(killed / "mlflow.db")
    assert 4 <= before < 12 and driver.returncode != 0, (before, driver.returncode)
    assert not (killed / "multirun" / "precision.json").exists()  # the sweep never got to its end

    resumed = run_sweep(killed, *cap)
    skipped = re.findall(r"^sweep finished in .* (\d+) skipped(?: \(.*\))?$", resumed.stdout, flags=re.MULTILINE)
    assert sum(map(int, skipped)) == before  # each round launched only the runs not recorded before
    found = [r for r in runs(sqlite_uri(killed), "precision-two-loads") if r.info.status == "FINISHED"]
    cells = Counter((r.data.params["workload.arrival_rate"], r.data.params["seed"]) for r in found)
    assert len(found) == len({r.data.tags["schedlab.run_key"] for r in found}) == 12
    assert set(cells.values()) == {1} and {s for rate, s in cells if rate == "0.035"} == {str(i) for i in range(9)}

    run_sweep(clean, *cap, "tracking=none")
    table, expected = (pr.table(pr.load(cwd / "multirun" / "precision.json")[0]) for cwd in (killed, clean))
    assert table == expected and "CAPPED" in table, table


@pytest.mark.slow
def test_ray_launcher_sweep_starts_ray_once_and_flags_the_capped_cell(tmp_path: Path) -> None:
    """The default launcher (a local Ray): 12 runs in 3 rounds on one Ray instance; the low load is
    met at 3 seeds, the high load CAPPED at 9 and said so."""
    proc = run_sweep(tmp_path, "hydra.sweeper.max_replications=9", "hydra.launcher.progress=false",
                     "hydra.launcher.local.object_store_memory=80000000")
    assert proc.stdout.count("starting a local Ray instance") == 1, proc.stdout
    assert "precision sweep: 12 runs in 3 round(s)" in proc.stdout
    assert f"NOT within target: 1 cell(s) capped or failing: {HIGH}" in proc.stdout
    verdicts = pr.load(tmp_path / "multirun" / "precision.json")[0]
    assert (verdicts[LOW].status, verdicts[LOW].tried) == (pr.MET, 3)
    assert (verdicts[HIGH].status, verdicts[HIGH].tried) == (pr.CAPPED, 9)
    assert verdicts[HIGH].metrics[0].half_width > verdicts[HIGH].metrics[0].bound
    found = runs(sqlite_uri(tmp_path), "precision-two-loads")
    assert {r.info.status for r in found} == {"FINISHED"} and len(found) == 12
    assert len({r.data.tags["schedlab.ray_node"] for r in found}) == 1


def test_an_invalid_run_on_ray_is_refused_before_ray_starts(tmp_path: Path) -> None:
    """The Ray launcher validates every run before Ray starts; the precision sweeper, which starts
    the Ray its rounds share, keeps that: one message, nothing run, no Ray."""
    proc = subprocess.run([sys.executable, str(RUN), "-m", *TWO_LOADS, "workload.arrival_rate=-1", "tracking=none"],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "starting a local Ray" not in proc.stdout + proc.stderr
    assert "invalid configuration, nothing was run" in proc.stderr
    assert "workload.arrival_rate must be a positive number" in proc.stderr
