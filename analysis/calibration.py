"""The calibration table (issue 27 C8): how many held-out published values a reconstruction meets.

A paper table with ``calibrates: {table: X, fit_row: R}`` is table X's sweep run with a fitted
workflow size. For X and each such variant, every published P and T value of X except row R (the
point the size was fitted on) is *held out*; per workload, remapping trigger and task count n we
count, in every column the table swept, those inside our 95 % CI (|ours − paper| ≤ our
half-width) and within 10 % of the paper's value.
O is left out: it is wall-clock time on another machine (docs/paper/README.md, finding on O).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.paper_result import TableResult, tidy
from analysis.paper_spec import level_key
from analysis.stats import COLUMN

#: the metrics compared (O is wall-clock: not a reconstruction target)
HELD_OUT_METRICS = ("late/proportion", "turnaround/mean")
COLUMNS = ["workload", "trigger", "n", "held_out", "inside_ci", "within_10pct", "missing"]


def held_out(result: TableResult, fit_row: object = None) -> pd.DataFrame:
    """One line per published P/T value of ``result``'s table (but ``fit_row``): ours beside it."""
    frame = tidy(result)
    run = set(result.summary[COLUMN]) if len(result.summary) else set()  # a column never swept holds nothing out
    frame = frame[frame["paper_mean"].notna() & frame["metric"].isin(HELD_OUT_METRICS) & frame["config"].isin(run)]
    if fit_row is not None:
        frame = frame[frame["row"] != level_key(fit_row)]
    gap = (frame["mean"] - frame["paper_mean"]).abs()
    return frame.assign(inside_ci=gap <= frame["half_width"], within_10pct=gap <= 0.1 * frame["paper_mean"].abs(),
                        trigger=frame["config"].str.rsplit("/", n=1).str[-1])


def task_count(result: TableResult) -> str:
    """The task count ``workload.n`` all the table's runs share ("—" before any run)."""
    return result.held.get("workload.n", "—")


def calibration(results: list[TableResult]) -> pd.DataFrame:
    """The counts for every calibrated table and its variants (empty when no table calibrates another)."""
    by_id = {r.table.id: r for r in results}
    variants = [r for r in results if r.table.calibrates and r.table.calibrates in by_id]
    parts: list[pd.DataFrame] = []
    for variant in variants:
        fit_row = variant.table.fit_row
        for result in (by_id[variant.table.calibrates], variant):
            workload = variant.table.calibrates.split("_")[0]
            parts.append(held_out(result, fit_row).assign(workload=workload, n=task_count(result),
                                                          table=result.table.id))
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    lines = pd.concat(parts, ignore_index=True).drop_duplicates(["table", "row", "config", "metric"])
    grouped = lines.groupby(["workload", "trigger", "n"], sort=True)
    return pd.DataFrame({
        "held_out": grouped.size(),
        "inside_ci": grouped["inside_ci"].sum(),
        "within_10pct": grouped["within_10pct"].sum(),
        "missing": grouped["mean"].apply(lambda s: int(s.isna().sum())),
    }).reset_index()[COLUMNS]


def write_calibration(results: list[TableResult], out: Path) -> Path | None:
    """``calibration.md`` and ``.csv`` under ``out`` (nothing when no table calibrates another)."""
    table = calibration(results)
    if table.empty:
        return None
    table.to_csv(out / "calibration.csv", index=False)
    lines = ["## Calibration (ours): held-out published values met at n = 50 vs the fitted n", "",
             "| workload | trigger | n | held-out P and T values | inside our 95 % CI | within 10 % | not run |",
             "|---|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r.workload} | {r.trigger} | {r.n} | {r.held_out} | {r.inside_ci} | {r.within_10pct} | {r.missing} |"
              for r in table.itertuples()]
    lines += ["", "Each published P and T of the calibrated tables but the fit point's (the fit tables "
              "`fit_<workload>` show it) is compared with our mean at the same row and column; "
              "O is left out (wall-clock, another machine). See analysis/calibration.py."]
    (out / "calibration.md").write_text("\n".join(lines) + "\n")
    return out / "calibration.md"
