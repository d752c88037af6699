"""The calibration table (analysis/calibration.py): held-out published values met by a table and its
calibration variant, on constructed results (counts worked out by hand)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis import AnalysisError
from analysis.calibration import calibration, write_calibration
from analysis.paper_result import TableResult, tidy
from analysis.paper_spec import PaperTable, read_table
from analysis.stats import COLUMN

P, T = "late/proportion", "turnaround/mean"
PUBLISHED = pd.DataFrame({
    "row": [1.0, 1.0, 2.0, 2.0, 2.0], "config": ["pd/subdeadline"] * 4 + ["pd/deadline"],
    "metric": [P, T, P, T, T], "mean": [0.01, 100.0, 0.02, 200.0, 200.0], "halfwidth": [0.0] * 5,
    "source": ["s"] * 5})


def result(table: str, n: int, means: dict[tuple[float, str, str], tuple[float, float]],
           calibrates: str = "", fit_row: object = None) -> TableResult:
    paper = PaperTable(table, table, "e", "workload.arrival_rate", ["policy.laxity_distribution"], [P, T], [],
                       Path(f"{table}.yaml"), PUBLISHED, calibrates, fit_row)
    summary = pd.DataFrame([{"workload.arrival_rate": row, COLUMN: config, "metric": metric, "mean": mean,
                             "sd": 1.0, "n": 10, "half_width": half}
                            for (row, config, metric), (mean, half) in means.items()])
    return TableResult(paper, pd.DataFrame(), summary, pd.DataFrame(), held={"workload.n": str(n)})


def test_counts_inside_the_ci_and_within_ten_percent_and_leaves_the_fit_row_out() -> None:
    # n = 50: P at row 1 inside (|0.012 − 0.01| ≤ 0.005) but 20 % off; T at row 1 within 10 % (105) but
    # outside its CI (± 2); row 2 missed in both; the deadline column's T at row 2 is not run.
    base = result("ligo_lambda", 50, {(1.0, "pd/subdeadline", P): (0.012, 0.005),
                                      (1.0, "pd/subdeadline", T): (105.0, 2.0),
                                      (2.0, "pd/subdeadline", P): (0.05, 0.001),
                                      (2.0, "pd/subdeadline", T): (300.0, 10.0)})
    # fitted: row 2 is the fit point (left out); row 1 met both ways
    fitted = result("ligofit_lambda", 54, {(1.0, "pd/subdeadline", P): (0.0101, 0.001),
                                           (1.0, "pd/subdeadline", T): (100.5, 1.0),
                                           (2.0, "pd/subdeadline", T): (200.0, 1.0)},
                    calibrates="ligo_lambda", fit_row=2.0)
    table = calibration([base, fitted])
    rows = {(r.trigger, r.n): (r.held_out, r.inside_ci, r.within_10pct, r.missing) for r in table.itertuples()}
    assert rows == {("subdeadline", "50"): (2, 1, 1, 0), ("subdeadline", "54"): (2, 2, 2, 0)}
    assert set(table["workload"]) == {"ligo"}


def test_nothing_is_written_without_a_calibration_variant(tmp_path: Path) -> None:
    assert write_calibration([result("ligo_lambda", 50, {(1.0, "pd/subdeadline", P): (0.01, 0.0)})], tmp_path) is None
    assert not (tmp_path / "calibration.md").exists()


def test_a_bad_calibrates_block_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "paper_x.yaml"
    path.write_text("experiment_name: e\npaper: {table: x, title: t, rows: null, configs: [a], metrics: [m],"
                    " calibrates: {fit_row: 1}}\n")
    with pytest.raises(AnalysisError, match=r"paper\.calibrates: expected"):
        read_table(path, tmp_path)


def test_a_calibration_variant_shows_only_the_columns_it_ran() -> None:
    """The variant ran the sub-deadline column only: no ``not run`` column for the deadline trigger,
    whose published value belongs to the calibrated table (which keeps it)."""
    ran = {(1.0, "pd/subdeadline", T): (100.5, 1.0)}
    fitted = result("ligofit_lambda", 54, ran, calibrates="ligo_lambda", fit_row=2.0)
    assert fitted.configs == ["pd/subdeadline"]
    assert set(tidy(fitted)["config"]) == {"pd/subdeadline"}
    assert result("ligo_lambda", 50, ran).configs == ["pd/subdeadline", "pd/deadline"]
    assert result("ligofit_lambda", 54, {}, calibrates="ligo_lambda").configs == ["pd/subdeadline", "pd/deadline"]
