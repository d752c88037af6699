"""A paper table's numbers (:class:`TableResult`) and how they read: what :mod:`analysis.paper` computes
and :mod:`analysis.paper_figures` show (one module, no import cycle)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analysis.formatting import metric_unit
from analysis.paper_spec import PaperTable, level_key
from analysis.stats import COLUMN, level_text

#: how a metric is shown: (name, unit, factor from our unit) — the paper prints P in %
DISPLAY = {"late/proportion": ("P", "%", 100.0), "turnaround/mean": ("T", "s", 1.0),
           "overhead/mean_s": ("O", "s", 1.0), "util": ("utilisation", "%", 100.0)}

def display(metric: str) -> tuple[str, str, float]:
    """``(name, unit, scale)`` of a metric in the tables (``late/proportion`` → P in %)."""
    return DISPLAY.get(metric, (metric, metric_unit(metric), 1.0))


def row_text(value: object) -> str:
    """A row level: a long decimal that is 1/N shows as ``1/N`` (the paper's rates), else as configured.

    >>> row_text(1 / 180), row_text(0.02), row_text(40)
    ('1/180', '0.02', '40')
    """
    text = level_text(value)
    try:
        number = float(text)
    except ValueError:
        return text
    if 0 < number < 1 and len(text) > 8 and abs(1 / number - round(1 / number)) < 1e-6:
        return f"1/{round(1 / number)}"
    return text


@dataclass
class TableResult:
    """One table's numbers: the runs it uses, our summary, the published values, claim lines, notes."""

    table: PaperTable
    design: pd.DataFrame
    summary: pd.DataFrame
    claims: pd.DataFrame
    codes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> list[str]:
        return [self.table.rows] if self.table.rows else []

    @property
    def configs(self) -> list[str]:
        """The table's columns: the published configurations, then ours."""
        ours = sorted(self.summary[COLUMN].unique()) if len(self.summary) else []
        return list(dict.fromkeys([*self.table.published["config"], *ours]))


def tidy(result: TableResult) -> pd.DataFrame:
    """Ours and the paper's numbers side by side, one line per cell and metric (our units)."""
    rows = result.rows
    ours = result.summary.rename(columns={COLUMN: "config"})
    ours = ours.assign(row=ours[rows[0]].map(level_key) if rows else "all")
    ours = ours[["row", "config", "metric", "mean", "half_width", "n"]]
    published = result.table.published
    published = published[published["config"].isin(result.configs)]
    published = published.assign(row=lambda f: f["row"].map(level_key) if rows else "all")
    published = published.rename(columns={"mean": "paper_mean", "halfwidth": "paper_halfwidth"})
    return ours.merge(published[["row", "config", "metric", "paper_mean", "paper_halfwidth", "source"]],
                      on=["row", "config", "metric"], how="outer")
