"""Run-to-run noise of a wall-clock metric (analysis/noise.py): the same runs made twice, cell means compared."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import AnalysisError
from analysis.export import RunExport
from analysis.noise import main, noise
from analysis.paper_spec import load_tables
from tests.conftest import REPO


def export(o: dict[tuple[str, int], float], p: float = 0.01) -> pd.DataFrame:
    """Runs keyed by (policy, seed) with O = ``o[key]``; the run key is the pair, P and T fixed."""
    rows = [{"experiment": "e", "run_id": f"{k}{s}", "tags.schedlab.run_key": f"{k}/{s}", "params.policy": k,
             "params.seed": str(s), "metrics.overhead/mean_s": v, "metrics.late/proportion": p,
             "metrics.turnaround/mean": 100.0} for (k, s), v in o.items()]
    return pd.DataFrame(rows)


def test_the_noise_is_how_far_a_cell_mean_moves_between_two_makings() -> None:
    a = export({("x", 0): 1.0, ("x", 1): 3.0, ("y", 0): 10.0, ("y", 1): 10.0, ("z", 0): 5.0, ("z", 1): 5.0})
    b = export({("x", 0): 2.0, ("x", 1): 4.0, ("y", 0): 12.0, ("y", 1): 9.0, ("z", 0): 7.0})  # z: one seed only
    found = noise(a, b, "overhead/mean_s")
    assert (found.runs, found.cells) == (5, 2)  # z is left out: not every seed was made twice
    deltas = np.array([1.0, 0.5])  # x: |2 − 3|, y: |10 − 10.5|
    assert found.median == pytest.approx(np.median(deltas)) and found.p95 == pytest.approx(np.quantile(deltas, 0.95))
    assert found.relative_median == pytest.approx(np.median([1.0 / 2.0, 0.5 / 10.0]))


def test_a_simulated_metric_has_no_noise() -> None:
    """P is the same in every making of a run: asked for it, the tool says 0, not a traceback."""
    a = export({("x", 0): 1.0, ("x", 1): 2.0})
    found = noise(a, export({("x", 0): 1.5, ("x", 1): 2.0}), "late/proportion")
    assert (found.cells, found.median, found.p95) == (1, 0.0, 0.0)


def test_runs_whose_simulated_metrics_differ_are_not_the_same_run() -> None:
    a, b = export({("x", 0): 1.0}), export({("x", 0): 1.0}, p=0.02)
    with pytest.raises(AnalysisError, match=r"run key x/0: metrics.late/proportion differs between the exports"):
        noise(a, b, "overhead/mean_s")


def test_the_committed_exports_measure_the_margin_the_o_claims_use(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/paper's runs and the study's share runs; the similar-O claims' margin is no tighter than their noise."""
    paper = REPO / "docs" / "paper"
    exports = [paper / "runs.parquet", paper / "selection_runs.parquet"]
    found = noise(*(RunExport.read(path).frame for path in exports), "overhead/mean_s")
    margins = {c.margin for t in load_tables(REPO / "conf" / "experiment", paper / "published")
               for c in t.claims if c.metric == "overhead/mean_s" and c.margin is not None}
    assert found.cells >= 10 and margins and min(margins) >= found.p95, (margins, found)
    assert main([str(path) for path in exports]) == 0 and capsys.readouterr().out == found.line() + "\n"


def test_a_missing_export_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]) == 2
    assert capsys.readouterr().err.startswith(f"noise.py: error: no run export at {tmp_path / 'a.parquet'}")
