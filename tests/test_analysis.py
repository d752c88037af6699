"""analysis: runs read back from a real (temporary, SQLite) MLflow store in the sweeps' layout.

The store holds a small two-policy sweep over ``workload.arrival_rate`` with three seeds, plus the
awkward cases: a cell with one replication, a metric missing from some runs, a FAILED run, a run
superseded by a later run of the same key, and an empty experiment.
"""

from __future__ import annotations

import math
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow.entities import Metric, Param

from analysis import AnalysisError
from analysis.formatting import format_pm, to_latex, to_markdown
from analysis.report import main
from analysis.runs import load_runs, varying_keys
from analysis.stats import aggregate, paired_differences
from analysis.summary import analyse, terminal_text, write_tables
from sim.stats import t_half_width

T_975_2 = 4.302652729749464  # Student t quantile, 0.975, 2 degrees of freedom (tables: 4.303)
WAIT = {  # (policy, rate) -> wait/mean per seed 1, 2, 3 (rate 2.0: seed 1 only)
    ("easy", 0.5): [10.0, 12.0, 17.0], ("conservative", 0.5): [14.0, 15.0, 19.0],
    ("easy", 1.0): [20.0, 22.0, 24.0], ("conservative", 1.0): [21.0, 20.0, 25.0],
    ("easy", 2.0): [40.0], ("conservative", 2.0): [44.0],
}
# A valid schedule on 8 nodes (job 4 waits for the whole machine); conservative delays jobs 3-6.
JOBS = pd.DataFrame({
    "job_id": [1, 2, 3, 4, 5, 6], "submit_time": [0.0, 5, 10, 20, 30, 40], "start_time": [0.0, 5, 60, 120, 170, 170],
    "end_time": [100.0, 60, 120, 170, 200, 230], "nodes": [4, 4, 4, 8, 2, 6], "time_limit": [120.0] * 6,
})


def jobs_table(policy: str, seed: int) -> pd.DataFrame:
    jobs = JOBS.copy()
    late = jobs["job_id"] >= 3
    delay = 10.0 * seed + (15.0 if policy == "conservative" else 0.0)
    jobs.loc[late, ["start_time", "end_time"]] += delay
    jobs["wait"] = jobs["start_time"] - jobs["submit_time"]
    jobs["bsld"] = 1.0
    jobs["machine"] = 0
    return jobs


class Store:
    """Logs runs exactly as the sweeps do (params flattened and dotted, tags, artifacts)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.uri = f"sqlite:///{root}/mlflow.db"
        self.client = mlflow.MlflowClient(self.uri)
        self.clock = 1_700_000_000_000

    def experiment(self, name: str) -> str:
        return self.client.create_experiment(name, artifact_location=str(self.root / "mlartifacts" / name))

    def log(self, exp: str, params: dict, metrics: dict, status: str = "FINISHED", tags: dict | None = None,
            jobs: pd.DataFrame | None = None) -> str:
        self.clock += 1000
        run = self.client.create_run(exp, start_time=self.clock, tags={"schedlab.sweep_id": "s1", **(tags or {})})
        run_id = run.info.run_id
        self.client.log_batch(run_id, metrics=[Metric(k, v, self.clock, 0) for k, v in metrics.items()],
                              params=[Param(k, str(v)) for k, v in params.items()])
        if jobs is not None:
            path = self.root / "jobs.parquet"
            jobs.to_parquet(path)
            self.client.log_artifact(run_id, str(path))
        self.client.log_text(run_id, "\n".join(f"{k}: {v}" for k, v in params.items()), "config.yaml")
        self.client.set_terminated(run_id, status, end_time=self.clock + 500)
        return run_id


def params_of(policy: str, rate: float, seed: int) -> dict:
    return {"experiment_name": "paper", "policy": policy, "policy.order": "fcfs",
            "policy.reservations": "1" if policy == "easy" else "all", "workload.name": "synthetic",
            "workload.arrival_rate": rate, "workload.jobs": 6, "workload.seed": seed, "cluster.nodes": 8, "seed": seed}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    s = Store(tmp_path_factory.mktemp("store"))
    exp = s.experiment("paper")
    s.experiment("empty")
    key = {"schedlab.run_key": "easy-0.5-1"}
    s.log(exp, params_of("easy", 0.5, 1), {"wait/mean": 999.0}, tags=key)  # superseded by the rerun below
    s.log(exp, params_of("easy", 1.0, 2), {}, status="FAILED",
          tags={"schedlab.run_key": "easy-1.0-2", "schedlab.error": "Timeout: worker lost"})  # retried below
    for (policy, rate), waits in WAIT.items():
        for seed, wait in enumerate(waits, start=1):
            metrics = {"wait/mean": wait, "util": 0.5 + 0.01 * seed, "jobs": 6.0}
            if not (policy == "conservative" and rate == 0.5 and seed == 3):  # missing metric
                metrics["bsld/mean"] = 1.0 + seed / 2 + (0.2 if policy == "conservative" else 0.0)
            if rate == 2.0:
                metrics["fairness/jain"] = 0.9
            s.log(exp, params_of(policy, rate, seed), metrics, tags={"schedlab.run_key": f"{policy}-{rate}-{seed}"},
                  jobs=jobs_table(policy, seed) if rate < 2.0 else None)
    s.log(exp, params_of("conservative", 1.0, 4), {}, status="FAILED",
          tags={"schedlab.run_key": "conservative-1.0-4",
                "schedlab.error": "Traceback (most recent call last):\nRuntimeError: capacity exceeded at t=5"})
    return s


@pytest.fixture(scope="module")
def runs(store: Store):
    return load_runs("paper", store.uri)


# -- loading ------------------------------------------------------------------------------------


def test_finished_runs_deduplicated_and_failed_listed(runs) -> None:
    assert len(runs.params) == 14
    assert runs.dropped == {"superseded by a later run of the same run key": 1, "FAILED, then finished on retry": 1}
    assert list(runs.failed["error"]) == [
        "Traceback (most recent call last):\nRuntimeError: capacity exceeded at t=5"]
    assert runs.params["workload.arrival_rate"].dtype.kind == "f" and runs.params["seed"].dtype.kind == "i"


def test_varying_keys_leave_out_seed_its_copies_and_policy_attributes(runs) -> None:
    assert runs.varying("seed", ["policy"]) == ["workload.arrival_rate"]
    assert "policy.reservations" in varying_keys(runs.params)  # without a column factor it varies
    assert runs.resolve_factor("policy") == "policy"
    assert runs.resolve_factor("arrival_rate") == "workload.arrival_rate"


def test_sweep_filter(store: Store) -> None:
    assert len(load_runs("paper", store.uri, sweep="latest").params) == 14
    with pytest.raises(AnalysisError, match=r"unknown sweep 'nope'; sweeps .*s1"):
        load_runs("paper", store.uri, sweep="nope")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: load_runs("nope", s.uri), r"unknown experiment 'nope' .* experiments: Default, empty, paper"),
        (lambda s: load_runs("empty", s.uri), r"experiment 'empty' has no runs yet"),
        (lambda s: load_runs("paper", f"sqlite:///{s.root}/absent.db"), r"no MLflow store at .*absent.db"),
        (lambda s: analyse(load_runs("paper", s.uri), metrics=["wait/mean", "wiat/mean"]),
         r"unknown metric 'wiat/mean' .* logged metrics: bsld/mean, fairness/jain, jobs, util, wait/mean"),
        (lambda s: analyse(load_runs("paper", s.uri), rows=["arival_rate"]),
         r"unknown factor 'arival_rate' \(not a config key\); keys that vary: policy, policy.reservations, "
         r"workload.arrival_rate; all keys: cluster.nodes, "),
        (lambda s: analyse(load_runs("paper", s.uri), baseline="fcfs"),
         r"unknown baseline 'fcfs'; policy levels: conservative, easy"),
    ],
)
def test_clear_errors(store: Store, call, message: str) -> None:
    with pytest.raises(AnalysisError, match=message) as info:
        call(store)
    assert "\n" not in str(info.value)


# -- statistics -----------------------------------------------------------------------------------


def cell(frame: pd.DataFrame, **where) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    for key, value in where.items():
        mask &= frame[key.replace("__", ".")] == value
    (row,) = frame[mask].itertuples(index=False)
    return pd.Series(row._asdict())


def test_aggregate_matches_hand_computed(runs) -> None:
    design = runs.design(["workload.arrival_rate", "policy"], ["wait/mean", "bsld/mean"])
    summary = aggregate(design, ["workload.arrival_rate"], ["policy"], ["wait/mean", "bsld/mean"])
    c = cell(summary, workload__arrival_rate=0.5, column="easy", metric="wait/mean")
    assert (c["mean"], c["n"]) == (13.0, 3)  # (10 + 12 + 17) / 3
    assert c["sd"] == pytest.approx(math.sqrt(13))  # ((-3)² + (-1)² + 4²) / 2 = 13
    assert c["half_width"] == pytest.approx(T_975_2 * math.sqrt(13) / math.sqrt(3))  # 8.9567
    missing = cell(summary, workload__arrival_rate=0.5, column="conservative", metric="bsld/mean")
    assert missing["n"] == 2 and missing["mean"] == pytest.approx(1.95)  # seed 3 did not log it: (1.7 + 2.2) / 2
    single = cell(summary, workload__arrival_rate=2.0, column="easy", metric="wait/mean")
    assert single["n"] == 1 and math.isnan(single["half_width"]) and single["mean"] == 40.0


def test_paired_difference_matches_hand_computed(runs) -> None:
    design = runs.design(["workload.arrival_rate", "policy"], ["wait/mean"])
    paired = paired_differences(design, ["workload.arrival_rate"], ["policy"], ["wait/mean"], "easy")
    low = cell(paired, workload__arrival_rate=0.5, metric="wait/mean")
    # conservative − easy per seed: 14−10, 15−12, 19−17 = 4, 3, 2 → mean 3, sd 1
    assert (low["mean"], low["sd"], low["n"], low["column"], low["baseline"]) == (3.0, 1.0, 3, "conservative", "easy")
    assert low["half_width"] == pytest.approx(T_975_2 / math.sqrt(3))  # 2.4841 < 3: excludes 0
    assert low["excludes_zero"]
    high = cell(paired, workload__arrival_rate=1.0, metric="wait/mean")  # 1, −2, 1 → mean 0
    assert high["mean"] == pytest.approx(0.0) and high["n"] == 3 and not high["excludes_zero"]
    # the unpaired CI of the same difference would be far wider: CRN pays off
    assert low["half_width"] < t_half_width(math.sqrt(13), 3)


# -- tables -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mean", "half", "n", "text"),
    [(1466.31, 4.62, 30, "1466.3 ± 4.6"), (0.1134, 0.01234, 30, "0.113 ± 0.012"), (2005.4, 29.0, 30, "2005 ± 29"),
     (52312.0, 12915.0, 5, "52000 ± 13000"), (1.0, 0.0996, 3, "1.00 ± 0.10"), (-3.04, 2.4841, 3, "-3.0 ± 2.5"),
     (0.001, 0.004, 3, "0.0010 ± 0.0040"), (40.0, math.nan, 1, "40 ± —"), (math.nan, math.nan, 0, "—"),
     (3.0, 0.0, 4, "3 ± 0"), (0.2, 1.4e-15, 3, "0.2 ± 0")],
)
def test_cell_digits(mean: float, half: float, n: int, text: str) -> None:
    assert format_pm(mean, half, n) == text


def test_tables_as_printed(runs) -> None:
    a = analyse(runs, metrics=["wait/mean", "bsld/mean", "fairness/jain"], baseline="easy")
    assert a.rows == ["workload.arrival_rate"] and a.levels == ["easy", "conservative"]
    md = to_markdown(a.ci_cells(), a.rows).splitlines()
    assert md[0].startswith("| workload.arrival_rate | wait/mean (s): easy | wait/mean (s): conservative |")
    assert [c.strip() for c in md[2].split("|")[1:4]] == ["0.5", "13.0 ± 9.0 (n=3)", "16.0 ± 6.6 (n=3)"]
    assert "40 ± — (n=1)" in md[4] and "44 ± — (n=1)" in md[4] and "0.9 ± — (n=1)" in md[4]
    assert md[2].rstrip(" |").endswith("—")  # fairness/jain was not logged at rate 0.5: no data
    text = terminal_text(a)
    assert "nan" not in text.lower()
    assert "3.0 ± 2.5 (n=3) *" in text and "0.0 ± 4.3 (n=3) |" in text  # paired: significant; 1, −2, 1: sd √3
    # bsld: conservative = easy + 0.2 exactly, no floating-point digits; zero variance: no significance claimed
    assert "0.2 ± 0 (n=3) |" in text and "0.2 ± 0 (n=2) |" in text
    assert "FAILED runs (1):" in text and "seed=4  RuntimeError: capacity exceeded at t=5" in text
    latex = to_latex(a.ci_cells(), a.rows, "cap", "tab:x")
    for piece in (r"\toprule", r"\midrule", r"\bottomrule", r"\cmidrule(lr){2-3}", r"13.0 $\pm$ 9.0",
                  r"\multicolumn{2}{c}{wait/mean (s)}", r"workload.arrival\_rate", r"40 $\pm$ ---"):
        assert piece in latex
    assert "nan" not in latex.lower()


def test_table_files(runs, tmp_path: Path) -> None:
    a = analyse(runs, metrics=["wait/mean"])
    write_tables(a, tmp_path)
    csv = pd.read_csv(tmp_path / "tables" / "ci.csv")
    assert list(csv.columns) == ["workload.arrival_rate", "policy", "metric", "mean", "sd", "n", "half_width",
                                 "ci_low", "ci_high"]
    assert len(csv) == 6 and sorted(csv["n"]) == [1, 1, 3, 3, 3, 3]
    paired = pd.read_csv(tmp_path / "tables" / "paired.csv")
    assert paired.loc[paired["workload.arrival_rate"] == 0.5, "excludes_zero"].item()
    assert (tmp_path / "tables" / "paired.tex").read_text().count(r"$^{*}$") == 1


# -- command line and report folder ------------------------------------------------------------------


def test_table_only_prints_and_writes_nothing(store: Store, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["--experiment", "paper", "--tracking-uri", store.uri, "--metrics", "wait/mean,util",
                 "--baseline", "easy", "--table-only"])
    out = capsys.readouterr().out
    assert code == 0 and list(tmp_path.iterdir()) == []
    assert "| workload.arrival_rate | wait/mean (s): easy |" in out and "Paired differences vs easy" in out


def test_cli_errors_are_one_line(store: Store, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--experiment", "paper", "--tracking-uri", store.uri, "--cols", "scheduler", "--table-only"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("report.py: error: unknown factor 'scheduler'") and err.count("\n") == 1
    assert main(["--table-only"]) == 2  # default store in an empty folder
    assert "no MLflow store at" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_report_folder(store: Store, tmp_path: Path, capsys) -> None:
    out = tmp_path / "rep"
    code = main(["--experiment", "paper", "--tracking-uri", store.uri, "--rows", "arrival_rate", "--cols", "policy",
                 "--metrics", "wait/mean,bsld/mean", "--baseline", "easy", "--out", str(out), "--gantt-jobs", "6"])
    assert code == 0, capsys.readouterr().err
    report = (out / "report.md").read_text()
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert len(figures) == 10  # 2 metric figures, ECDF, Gantt, utilisation; PNG + PDF each
    for name in figures:
        data = (out / "figures" / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n" if name.endswith(".png") else b"%PDF-")
        assert len(data) > 1000
        if name.endswith(".png"):
            assert f"](figures/{name})" in report
    for table in ("ci.csv", "ci.tex", "paired.csv", "paired.tex"):
        assert (out / "tables" / table).stat().st_size > 0 and f"(tables/{table})" in report
    assert "| 0.5 " in report and "## Failed runs (1)" in report and "2 runs had no jobs.parquet" in report
