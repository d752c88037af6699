"""A shrunk ``make paper``: two factor tables (λ and m, two levels each) × PD/ED × two seeds of tiny
LIGO runs, swept by sweeps/paper.py on Hydra's basic launcher, then analysis/paper.py: the tables'
shape, every published value beside ours, and claims computed from the runs (a changed metric in
the store flips a verdict)."""

from __future__ import annotations

import csv
import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient
from omegaconf import OmegaConf

from analysis import AnalysisError
from analysis.agreement import table_line
from analysis.claims import NOT_SUPPORTED, SUPPORTED, overall
from analysis.export import REQUIRED, TAGS, RunExport
from analysis.paper import main, paper_text, read_runs
from analysis.paper_result import display, row_text
from analysis.paper_spec import level_key, load_tables, read_published
from analysis.runs import RunSet
from tests.conftest import REPO, built_once
from tests.test_sweeper import ENV

EXPERIMENT = "schedlab-paper-test"
RATES = (1 / 265, 1 / 180)
TABLES = {  # id → (row key, sweep levels)
    "t_lambda": ("workload.arrival_rate", ",".join(repr(r) for r in RATES)),
    "t_m": ("cluster.m", "40,50"),
}
METRICS = ["late/proportion", "turnaround/mean", "overhead/mean_s"]
PUBLISHED = {  # id → rows of the published CSV (our units)
    "t_lambda": [(repr(1 / 265), "pd", "turnaround/mean", "1346", "0.6"), (repr(1 / 180), "ed", "late/proportion",
                                                                            "0.0011", "0.0001")],
    "t_m": [("40", "pd", "overhead/mean_s", "0.034", "0.003"), ("50", "ed", "turnaround/mean", "1466", "")],
}


def experiment_file(tid: str, rows: str, levels: str) -> str:
    return f"""# @package _global_
defaults:
  - override /cluster: rmdcwf
  - override /workload: ligo
  - override /policy: rmdcwf
experiment_name: {EXPERIMENT}
replications: 2
workload: {{jobs: 12, warmup: 2}}
paper:
  table: {tid}
  title: "test table {tid}"
  rows: {rows}
  configs: [policy.laxity_distribution]
  metrics: [{", ".join(METRICS)}]
  claims:
    - {{below: 1.0e+6, metric: turnaround/mean, text: "T below 10^6 s"}}
    - {{trend: increasing, metric: late/proportion, text: "P rises"}}
    - {{a: {{policy.laxity_distribution: ed}}, b: {{policy.laxity_distribution: pd}}, relation: "~",
       metric: turnaround/mean, text: "PD and ED similar T"}}
hydra:
  sweeper:
    params:
      policy.laxity_distribution: pd,ed
      {rows}: {levels}
      seed: range(0,${{replications}})
"""


@pytest.fixture(scope="module")
def paper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sweep both test tables once per session (the shared default point runs once) and write the report."""
    return built_once(tmp_path_factory, "paper", build_paper)


def build_paper(root: Path) -> None:
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "published").mkdir()
    for tid, (rows, levels) in TABLES.items():
        (root / "conf" / "experiment" / f"paper_{tid}.yaml").write_text(experiment_file(tid, rows, levels))
        with (root / "published" / f"{tid}.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["row", "config", "metric", "mean", "halfwidth", "source"])
            writer.writerows([*rec, "test"] for rec in PUBLISHED[tid])
    proc = sweep_tables(root, root)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "already recorded" in proc.stdout  # λ = 1/180, m = 50 is both tables' default point
    assert report(root, root / "out") == 0


def sweep_tables(root: Path, cwd: Path, *overrides: str) -> subprocess.CompletedProcess:
    """``sweeps/paper.py`` over the test tables in ``root``, run in ``cwd`` (its default store), serially."""
    return subprocess.run(
        [sys.executable, str(REPO / "sweeps" / "paper.py"), "--conf-dir", str(root / "conf" / "experiment"),
         "hydra/launcher=serial", f"hydra.searchpath=[file://{root / 'conf'}]", *overrides],
        cwd=cwd, env=ENV, capture_output=True, text=True, timeout=240)


def report(root: Path, out: Path, store: Path | None = None) -> int:
    """The tables of the experiments in ``root`` from the store in ``store`` (default: ``root``'s)."""
    return main(["--conf-dir", str(root / "conf" / "experiment"), "--published", str(root / "published"),
                 "--out", str(out), "--tracking-uri", f"sqlite:///{store or root}/mlflow.db"])


def markdown_table(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return split[0], split[2:]


def test_tables_have_the_papers_shape(paper: Path) -> None:
    for tid, (rows, _) in TABLES.items():
        header, body = markdown_table(paper / "out" / f"{tid}.md")
        assert header[0] == rows
        assert header[1:] == [f"{display(m)[0]} ({display(m)[1]}): {c}" for m in METRICS for c in ("pd", "ed")]
        assert len(body) == 2 and all(len(r) == len(header) for r in body)
        assert all("(n=2)" in cell for r in body for cell in r[1:])  # every cell ran, with its n
        assert (paper / "out" / "figures" / f"{tid}.png").stat().st_size > 10_000
        assert r"\begin{tabular}" in (paper / "out" / f"{tid}.tex").read_text()
    _, body = markdown_table(paper / "out" / "t_lambda.md")
    assert [r[0] for r in body] == [row_text(r) for r in RATES] == ["1/265", "1/180"]


def test_every_published_value_sits_beside_ours(paper: Path) -> None:
    for tid in TABLES:
        header, body = markdown_table(paper / "out" / f"{tid}.md")
        published = read_published(paper / "published" / f"{tid}.csv", METRICS)
        for rec in published.itertuples():
            name, unit, scale = display(rec.metric)
            row = next(r for r in body if r[0] == row_text(float(rec.row)))
            cell = row[header.index(f"{name} ({unit}): {rec.config}")]
            assert cell.endswith(f"· paper {paper_text(rec.mean, rec.halfwidth, scale)}"), cell
        unpublished = sum(cell.endswith("· paper —") for r in body for cell in r[1:])
        assert unpublished == 2 * 6 - len(published)


def test_the_index_says_how_close_each_table_comes_to_the_published_values(paper: Path) -> None:
    """tables.md's agreement: per table and pooled over the tables of one experiment, the published P and T
    cells, the median |ours − paper| / paper and the published values inside our CI, from the tables' CSVs."""
    header, body = markdown_table(paper / "out" / "tables.md")
    assert header == ["table", *(f"{m}: {c}" for m in "PT" for c in ("published cells", "median error",
                                                                     "inside our CI"))]
    csvs = {tid: pd.read_csv(paper / "out" / f"{tid}.csv") for tid in TABLES}
    expected = {**csvs, "**t_lambda + t_m**": pd.concat(csvs.values())}
    assert [r[0] for r in body] == list(expected)
    for line in body:
        frame = expected[line[0]]
        for k, metric in enumerate(("late/proportion", "turnaround/mean")):
            cells = frame[(frame["metric"] == metric) & frame["paper_mean"].notna()]
            error = ((cells["mean"] - cells["paper_mean"]).abs() / cells["paper_mean"]).median()
            inside = ((cells["mean"] - cells["paper_mean"]).abs() <= cells["half_width"]).sum()
            assert line[1 + 3 * k: 4 + 3 * k] == [str(len(cells)), "—" if len(cells) == 0 else f"{error:.3f}",
                                                  f"{inside} of {len(cells)}"], line
    assert [r[1] for r in body] == ["1", "0", "1"] and [r[4] for r in body] == ["1", "1", "2"]  # PUBLISHED's P, T


def test_a_table_not_fully_run_says_how_many_of_its_published_cells_ran() -> None:
    nan = float("nan")
    frame = pd.DataFrame({"metric": ["late/proportion"] * 2 + ["turnaround/mean"], "mean": [0.02, nan, 100.0],
                          "half_width": [0.005, nan, 5.0], "n": [10, nan, 10], "paper_mean": [0.01, 0.01, 110.0]})
    assert table_line("t", frame) == ["t", "2 (1 run)", "1.000", "0 of 1", "1", "0.091", "0 of 1"]


def test_claims_come_from_the_runs(paper: Path, tmp_path: Path) -> None:
    verdicts = overall(pd.read_csv(paper / "out" / "claims.csv")).set_index(["table", "claim"])["verdict"]
    assert verdicts[("t_m", "T below 10^6 s")] == SUPPORTED
    shutil.copy(paper / "mlflow.db", tmp_path / "mlflow.db")  # the shared store stays as swept
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name(EXPERIMENT)
    cell = client.search_runs([exp.experiment_id], "params.`cluster.m` = '40' and "
                              "params.`policy.laxity_distribution` = 'ed'")
    assert len(cell) == 2
    for k, run in enumerate(cell):  # the m = 40 / ED cell's T now far above the bound
        client.log_metric(run.info.run_id, "turnaround/mean", 5e6 + k * 1e5, step=1)
    assert report(paper, tmp_path / "out", tmp_path) == 0
    flipped = overall(pd.read_csv(tmp_path / "out" / "claims.csv")).set_index(["table", "claim"])["verdict"]
    assert flipped[("t_m", "T below 10^6 s")] == NOT_SUPPORTED
    assert flipped[("t_m", "PD and ED similar T")] == NOT_SUPPORTED
    assert flipped[("t_lambda", "T below 10^6 s")] == verdicts[("t_lambda", "T below 10^6 s")]  # its runs unchanged


def test_bad_published_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text("row,config,metric,mean,halfwidth,source\n40,pd,late/proportion,abc,,seed\n")
    with pytest.raises(AnalysisError, match=r"x.csv:2: mean 'abc' is not a number"):
        read_published(bad, METRICS)
    bad.write_text("row,config,metric,mean,halfwidth,source\n40,pd,wait/mean,1,,seed\n")
    with pytest.raises(AnalysisError, match=r"x.csv:2: metric 'wait/mean' is not one of the table's"):
        read_published(bad, METRICS)


def test_runs_from_two_stores_are_concatenated(paper: Path, tmp_path: Path) -> None:
    """Seed 0 in one store and seed 1 in another give the same tables as both seeds in one store."""
    whole, halves = tmp_path / "whole.db", {seed: tmp_path / f"seed{seed}.db" for seed in (0, 1)}
    for path in (whole, *halves.values()):
        shutil.copy(paper / "mlflow.db", path)
    for seed, path in halves.items():  # each half keeps one seed: the other's runs are deleted
        client = MlflowClient(f"sqlite:///{path}")
        exp = client.get_experiment_by_name(EXPERIMENT)
        for run in client.search_runs([exp.experiment_id], f"params.seed = '{1 - seed}'"):
            client.delete_run(run.info.run_id)

    def tables(out: Path, *stores: Path) -> int:
        return main(["--conf-dir", str(paper / "conf" / "experiment"), "--published", str(paper / "published"),
                     "--out", str(out), "--no-figures", *(a for s in stores for a in ("--tracking-uri", f"sqlite:///{s}"))])

    assert tables(tmp_path / "one", whole) == 0
    assert tables(tmp_path / "two", *halves.values()) == 0
    for tid in TABLES:
        assert (tmp_path / "two" / f"{tid}.csv").read_text() == (tmp_path / "one" / f"{tid}.csv").read_text()
        assert "(n=2)" in (tmp_path / "two" / f"{tid}.md").read_text()
    assert tables(tmp_path / "half", halves[0]) == 0  # one store alone: one seed per cell
    _, body = markdown_table(tmp_path / "half" / "t_lambda.md")
    assert all("(n=1)" in cell for r in body for cell in r[1:])


def test_a_run_key_in_two_stores_is_refused(paper: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "copy.db"
    shutil.copy(paper / "mlflow.db", copy)
    status = main(["--conf-dir", str(paper / "conf" / "experiment"), "--published", str(paper / "published"),
                   "--out", str(tmp_path / "out"), "--no-figures", "--tracking-uri", f"sqlite:///{paper}/mlflow.db",
                   "--tracking-uri", f"sqlite:///{copy}"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("paper.py: error: run key ") and "is in two stores" in err and str(copy) in err
    assert len(err.strip().splitlines()) == 1


def _factor_runs(m_levels_at_default: list[int], em_levels: list[int]) -> RunSet:
    """A factor-at-a-time store: em_max levels at m = 50, and m levels at the default em_max 5."""
    rows = [{"workload.em_max": em, "cluster.m": 50, "seed": s} for em in em_levels for s in (0, 1)]
    rows += [{"workload.em_max": 5, "cluster.m": m, "seed": s} for m in m_levels_at_default for s in (0, 1)]
    params = pd.DataFrame(rows, index=[f"r{i}" for i in range(len(rows))]).astype(str)
    metrics = pd.DataFrame({"late/proportion": [0.01 * i for i in range(len(rows))]}, index=params.index)
    return RunSet("e", "sqlite://", params, metrics, pd.DataFrame(index=params.index), pd.DataFrame())


def test_a_factor_held_at_the_level_most_runs_share_or_refused_when_tied() -> None:
    from analysis.paper import table_design
    from analysis.paper_spec import PaperTable

    table = PaperTable("t", "t", "e", "workload.em_max", [], ["late/proportion"], [], Path("t.yaml"), pd.DataFrame())
    # only the default em_max ran (its other levels not yet): m = 50 hosts the most runs → held there
    runs = _factor_runs([40, 50, 60], [5])
    design, notes = table_design(runs, table)
    assert set(runs.params.loc[design.index, "cluster.m"]) == {"50"} and len(design) == 4
    assert "the level common to every row with the most runs" in notes[0]
    # a tie between two common levels is still refused, naming the key
    with pytest.raises(AnalysisError, match=r"vary in cluster\.m"):
        table_design(_factor_runs([40, 60], []), table)


def sweep_levels(path: Path) -> dict[str, set[str]]:
    """Each swept config key of an experiment file → its levels as comparison keys (``range`` axes left out)."""
    params = OmegaConf.to_container(OmegaConf.load(path), resolve=False)["hydra"]["sweeper"]["params"]
    return {key: {level_key(yaml.safe_load(v)) for v in str(text).split(",")}
            for key, text in params.items() if not str(text).startswith("range(")}


@pytest.mark.parametrize("path", sorted((REPO / "conf" / "experiment").glob("paper_*.yaml")), ids=lambda p: p.stem)
def test_each_paper_table_refers_only_to_levels_it_sweeps(path: Path) -> None:
    """Before hours of sweeps: each shipped table loads with its published values, and every level a claim
    compares or a published value sits at is one the experiment runs (a typo would read "inconclusive" or
    stand in a column of its own)."""
    [table] = load_tables(path.parent, REPO / "docs" / "paper" / "published", only=[path.stem])
    levels = sweep_levels(path)
    for claim in table.claims:
        for key, wanted in [*claim.a.items(), *claim.b.items(), *claim.where.items()]:
            if key in levels:
                assert {level_key(v) for v in (wanted if isinstance(wanted, list) else [wanted])} <= levels[key], claim
    if all(key in levels for key in table.configs):
        labels = {"/".join(combo) for combo in itertools.product(*(sorted(levels[k]) for k in table.configs))}
        assert set(table.published["config"]) <= labels
    if table.rows in levels:
        assert {level_key(r) for r in table.published["row"]} <= levels[table.rows]


def test_a_claim_on_a_key_that_is_not_a_factor_is_refused(tmp_path: Path) -> None:
    (tmp_path / "published").mkdir()
    text = experiment_file("t", "cluster.m", "40,50").replace("{policy.laxity_distribution: ed}",
                                                              "{policy.laxity_distributon: ed}")
    (tmp_path / "paper_t.yaml").write_text(text)
    (tmp_path / "published" / "t.csv").write_text("row,config,metric,mean,halfwidth,source\n")
    with pytest.raises(AnalysisError, match=r"claims\[2\]: policy.laxity_distributon not a factor of the table "
                                            r"\(cluster.m, policy.laxity_distribution\)"):
        load_tables(tmp_path, tmp_path / "published")


def test_the_legend_names_a_series_missing_from_the_first_panel() -> None:
    """MRCP-RM's published T and O have no P beside them: their legend entry comes from a later panel."""
    import matplotlib.pyplot as plt

    from analysis.paper_figures import legend_entries

    fig, (p, t) = plt.subplots(1, 2)
    p.plot([0, 1], [0, 1], label="ours mrcp")
    t.plot([0, 1], [1, 2], label="ours mrcp")
    t.plot([0, 1], [2, 3], label="paper mrcp")
    _, labels = legend_entries([p, t])
    plt.close(fig)
    assert labels == ["ours mrcp", "paper mrcp"]


def build(paper: Path, out: Path, *args: str) -> int:
    """analysis/paper.py on the test tables, the runs from ``args`` (--tracking-uri … or --runs …)."""
    return main(["--conf-dir", str(paper / "conf" / "experiment"), "--published", str(paper / "published"),
                 "--out", str(out), *args])


def test_the_exported_runs_rebuild_every_table_claim_and_figure_byte_for_byte(paper: Path, tmp_path: Path) -> None:
    store, export = f"sqlite:///{paper}/mlflow.db", tmp_path / "runs.parquet"
    assert build(paper, tmp_path / "unused", "--export-runs", str(export), "--tracking-uri", store) == 0
    assert not (tmp_path / "unused").exists() and [p.name for p in tmp_path.iterdir()] == ["runs.parquet"]  # atomic
    assert build(paper, tmp_path / "mlflow", "--tracking-uri", store) == 0
    assert build(paper, tmp_path / "export", "--runs", str(export)) == 0
    files = sorted(p.relative_to(tmp_path / "mlflow") for p in (tmp_path / "mlflow").rglob("*") if p.is_file())
    assert {f.suffix for f in files} == {".md", ".tex", ".csv", ".png"} and len(files) == 2 * 4 + 3
    for name in files:
        assert (tmp_path / "export" / name).read_bytes() == (tmp_path / "mlflow" / name).read_bytes(), name
    # the same frames as read from MLflow, one row per finished run, the columns the brief lists
    mine, theirs = read_runs(EXPERIMENT, [store]), RunExport.read(export).runs(EXPERIMENT)
    pd.testing.assert_frame_equal(theirs.params, mine.params)
    pd.testing.assert_frame_equal(theirs.metrics, mine.metrics)
    pd.testing.assert_frame_equal(theirs.tags, mine.tags[list(theirs.tags.columns)])
    frame = pd.read_parquet(export)
    assert len(frame) == len(mine.params) == 12 and set(REQUIRED) <= set(frame.columns)
    assert frame[list(TAGS)].notna().all().all() and frame["run_id"].is_unique
    assert {f"metrics.{m}" for m in METRICS} | {"params.cluster.m", "params.policy.laxity_distribution"} <= set(frame)


def test_an_experiment_missing_from_the_export_is_not_run(paper: Path, tmp_path: Path) -> None:
    export = tmp_path / "runs.parquet"
    assert build(paper, tmp_path, "--export-runs", str(export), "--tracking-uri", f"sqlite:///{paper}/mlflow.db") == 0
    frame = pd.read_parquet(export)
    frame.assign(experiment="another").to_parquet(export)
    assert build(paper, tmp_path / "out", "--runs", str(export), "--no-figures") == 0
    assert "not run: experiment 'schedlab-paper-test' has no runs yet in the run export" in (
        tmp_path / "out" / "t_m.md").read_text()


def _drop_code(path: Path) -> None:
    pd.read_parquet(path).drop(columns=TAGS[1]).to_parquet(path)


def _twice(path: Path) -> None:
    frame = pd.read_parquet(path)
    pd.concat([frame, frame.iloc[:1]]).to_parquet(path)


@pytest.mark.parametrize(("spoil", "message"), [
    (lambda p: p.unlink(), "no run export at {path}"),
    (lambda p: p.write_text("run_id,experiment\n1,x\n"), "{path} is not a run export: not a Parquet file"),
    (_drop_code, "{path} is not a run export: no column tags.schedlab.code"),
    (_twice, "{path}: run .* is in the export twice"),
])
def test_a_bad_run_export_is_one_line(paper: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      spoil: Any, message: str) -> None:
    export = tmp_path / "runs.parquet"
    assert build(paper, tmp_path, "--export-runs", str(export), "--tracking-uri", f"sqlite:///{paper}/mlflow.db") == 0
    capsys.readouterr()
    spoil(export)
    assert build(paper, tmp_path / "out", "--runs", str(export), "--no-figures") == 2
    err = capsys.readouterr().err
    assert re.match("paper.py: error: " + message.format(path=re.escape(str(export))), err), err
    assert len(err.strip().splitlines()) == 1


def test_an_export_keeps_every_run_so_filters_are_refused(paper: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert build(paper, tmp_path, "--export-runs", str(tmp_path / "r.parquet"), "workload.jobs=12",
                 "--tracking-uri", f"sqlite:///{paper}/mlflow.db") == 2
    assert "--export-runs writes every run" in capsys.readouterr().err and not (tmp_path / "r.parquet").exists()


COMMITTED = REPO / "docs" / "paper" / "runs.parquet"


def test_the_committed_export_rebuilds_the_committed_table(tmp_path: Path) -> None:
    """The runs behind docs/paper, kept as data, give its tables without MLflow: caption (code fingerprint) and all."""
    assert COMMITTED.stat().st_size < 5_000_000
    assert main(["--runs", str(COMMITTED), "--only", "paper_ligo_lambda", "--no-figures", "--out", str(tmp_path),
                 "--conf-dir", str(REPO / "conf" / "experiment"),
                 "--published", str(REPO / "docs" / "paper" / "published")]) == 0
    for name in ("ligo_lambda.csv", "ligo_lambda.md"):
        assert (tmp_path / name).read_bytes() == (REPO / "docs" / "paper" / name).read_bytes(), name
