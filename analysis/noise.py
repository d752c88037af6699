"""Run-to-run noise of a wall-clock metric: the same runs made twice, in two run exports.

Usage::

    python analysis/noise.py docs/paper/runs.parquet docs/paper/selection_runs.parquet   # O by default
    python analysis/noise.py A.parquet B.parquet --metric sim/seconds

Runs with the same run key are the same configuration and seed on the same simulator code, so every
simulated metric is equal (checked: a run key whose P or T differ is an error) and only the wall clock
differs. A *cell* is one configuration: its runs over the seeds, made in both exports. The noise of a
cell mean is |mean in A − mean in B|; the report gives its median and 95th percentile over the cells,
in the metric's unit and relative to the cell's mean. A similarity claim on a wall-clock metric takes a
``margin:`` no tighter than the 95th percentile (``docs/paper/README.md``, finding 4).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import AnalysisError
from analysis.export import RunExport
from analysis.runs import RUN_KEY_TAG, SEED_KEY

KEY = f"tags.{RUN_KEY_TAG}"
#: simulated metrics that must agree between two makings of one run
SIMULATED = ("metrics.late/proportion", "metrics.turnaround/mean")


@dataclass(frozen=True)
class Noise:
    """How much a cell mean of ``metric`` moves between two makings of the same runs."""

    metric: str
    runs: int  # runs made in both
    cells: int  # configurations with every seed in both
    median: float  # of |Δ cell mean|, in the metric's unit
    p95: float
    relative_median: float  # of |Δ cell mean| / cell mean
    relative_p95: float

    def line(self) -> str:
        return (f"{self.metric}: {self.runs} runs made twice, {self.cells} cells; |Δ cell mean| median "
                f"{self.median:.3g}, 95th percentile {self.p95:.3g} ({self.relative_median:.0%} and "
                f"{self.relative_p95:.0%} of the cell mean)")


def _cell(frame: pd.DataFrame, config: list[str]) -> pd.Series:
    """Each run's configuration (its experiment and params but the seed), as one text."""
    return frame.reindex(columns=["experiment", *config]).fillna("").astype(str).agg("|".join, axis=1)


def noise(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> Noise:
    """The noise of ``metric`` between exports ``a`` and ``b`` (frames as :class:`RunExport` reads them)."""
    column = f"metrics.{metric}"
    both = a.merge(b[[KEY, *dict.fromkeys([column, *(c for c in SIMULATED if c in b)])]], on=KEY, suffixes=("", " (b)"))
    for sim in SIMULATED:
        if sim in both and f"{sim} (b)" in both:
            differ = both[both[sim].ne(both[f"{sim} (b)"]) & both[sim].notna()]
            if len(differ):
                raise AnalysisError(f"run key {differ[KEY].iloc[0]}: {sim} differs between the exports "
                                    "(not the same run made twice)")
    if both.empty:
        raise AnalysisError("no run key is in both exports")
    config = sorted(c for c in both if c.startswith("params.") and c != f"params.{SEED_KEY}")
    grouped = both.assign(cell=_cell(both, config)).groupby("cell")
    sizes, made = grouped.size(), _cell(a, config).value_counts()
    full = sizes.index[sizes.eq(made.reindex(sizes.index))]  # every seed of the configuration made twice
    if not len(full):
        raise AnalysisError("no configuration has all its seeds in both exports")
    mean_a = grouped[column].mean()[full]
    delta = (mean_a - grouped[f"{column} (b)"].mean()[full]).abs()
    relative = delta / mean_a
    return Noise(metric, len(both), len(full), float(np.median(delta)), float(np.quantile(delta, 0.95)),
                 float(np.median(relative)), float(np.quantile(relative, 0.95)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="noise.py", description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="a run export (analysis/paper.py --export-runs)")
    parser.add_argument("b", type=Path, help="another, with some of the same runs")
    parser.add_argument("--metric", default="overhead/mean_s", help="a wall-clock metric (default: O)")
    args = parser.parse_args(argv)
    try:
        print(noise(RunExport.read(args.a).frame, RunExport.read(args.b).frame, args.metric).line())
    except AnalysisError as exc:
        print(f"noise.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
