"""Issue 38 item 3, run length and tails (``docs/paper/selection.md``, "Run length and tails"): at each
workload's fit point, the per-workflow turnaround distribution of 2,000-, 4,000- and 8,000-workflow runs,
read back from each run's ``workflows.parquet`` (``sim.workflows.metrics.WORKFLOW_COLUMNS``).

Per run, over the measured workflows — the table's rows in (arrival, id) order after the first
``workload.warmup``, the exclusion the run's own metrics apply — P, T, the turnaround's median / p90 / p99 /
max, the late count, the median turnaround of late and of on-time workflows, T of the on-time workflows alone
(so T = (1 − P)·T on-time + P·T late says how much of T the late ones carry), and T of the first and the
last quarter of the measured workflows in arrival order (a queue that grows over the run shows as a last
quarter slower than the first). Each is then a mean over seeds ± the 95 % CI of :mod:`analysis.stats`.

Usage::

    python analysis/run_length.py --tracking-uri sqlite:////work/stores/runlength/mlflow.db
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis import AnalysisError
from analysis.formatting import format_pm
from analysis.runs import load_runs
from analysis.stats import COLUMN, aggregate

EXPERIMENT = "schedlab-selection-runlength"
ARTIFACT = "workflows.parquet"
READING = ("policy.remap_trigger", "policy.multi_parent", "policy.late_rule")
ROWS = ["workload", "reading", "size", "jobs"]
#: what :func:`tail_stats` returns, in the order of the printed tables
STATS = ("P (%)", "T (s)", "T on-time", "T first ¼", "T last ¼", "late", "median", "p90", "p99", "max", "late median",
         "on-time median")
#: metrics the runs logged, shown beside them: the offered load says whether a queue can be stable (< 1)
LOGGED = {"load": "load/offered"}
TABLES = (("P, T and the queue over the run", ("load", "P (%)", "T (s)", "T on-time", "T first ¼", "T last ¼",
                                                   "late")),
          ("turnaround distribution (s)", ("median", "p90", "p99", "max", "late median", "on-time median")))


def measured(table: pd.DataFrame, warmup: int) -> pd.DataFrame:
    """The workflows a run's metrics count: all but the first ``warmup`` in (arrival, id) order, with their
    turnaround ``completion − earliest_start`` (the metrics' T)."""
    ordered = table.sort_values(["arrival", "job_id"], kind="stable").iloc[warmup:]
    if ordered.empty:
        raise AnalysisError(f"a warm-up of {warmup} workflows leaves none of the {len(table)} to measure")
    return ordered.assign(turnaround=ordered["completion"] - ordered["earliest_start"]).reset_index(drop=True)


def tail_stats(table: pd.DataFrame, warmup: int) -> dict[str, float]:
    """One run's statistics (:data:`STATS`) from its per-workflow table; ``late median`` is NaN in a run
    without late workflows (``on-time median`` and ``T on-time`` in one without on-time ones). The quarters are
    ``numpy.array_split`` of the measured workflows in arrival order into 4 (sizes differ by at most 1).

    >>> t = pd.DataFrame({"job_id": range(6), "arrival": [0., 1, 2, 3, 4, 5], "earliest_start": [0., 1, 2, 3, 4, 5],
    ...                   "deadline": [9.] * 6, "completion": [1., 3, 4, 13, 9, 25], "late": [0, 0, 0, 1, 0, 1]})
    >>> s = tail_stats(t, warmup=2)
    >>> s["P (%)"], s["T (s)"], s["T first ¼"], s["T last ¼"], s["late median"], s["on-time median"]
    (50.0, 9.25, 2.0, 20.0, 15.0, 3.5)
    """
    m = measured(table, warmup)
    turnaround = m["turnaround"].to_numpy(dtype=float)
    late = m["late"].to_numpy(dtype=bool)
    quarters = np.array_split(turnaround, 4)
    return {"P (%)": float(100.0 * late.mean()), "T (s)": float(turnaround.mean()),
            "T on-time": float(turnaround[~late].mean()) if (~late).any() else np.nan,
            "T first ¼": float(quarters[0].mean()), "T last ¼": float(quarters[-1].mean()), "late": float(late.sum()),
            "median": float(np.median(turnaround)), "p90": float(np.percentile(turnaround, 90)),
            "p99": float(np.percentile(turnaround, 99)), "max": float(turnaround.max()),
            "late median": float(np.median(turnaround[late])) if late.any() else np.nan,
            "on-time median": float(np.median(turnaround[~late])) if (~late).any() else np.nan}


def run_stats(tracking_uri: str, experiment: str = EXPERIMENT) -> pd.DataFrame:
    """One line per finished run of ``experiment``: workload, reading, size, jobs, seed and :func:`tail_stats`.
    A run's P and T from its table must equal the metrics it logged (same warm-up, same rows)."""
    runs = load_runs(experiment, tracking_uri)
    p, logged = runs.params, runs.metrics
    lines = []
    for run_id in p.index:
        table = runs.artifact_table(run_id, ARTIFACT)
        if table is None:
            raise AnalysisError(f"run {run_id} has no {ARTIFACT} artifact")
        stats = tail_stats(table, int(p.at[run_id, "workload.warmup"]))
        for ours, metric, scale in (("P (%)", "late/proportion", 100.0), ("T (s)", "turnaround/mean", 1.0)):
            if not np.isclose(stats[ours], scale * logged.at[run_id, metric], rtol=1e-9, atol=1e-9):
                raise AnalysisError(f"run {run_id}: {ours} from {ARTIFACT} is {stats[ours]}, "
                                    f"the run logged {scale * logged.at[run_id, metric]}")
        lines.append({"workload": p.at[run_id, "workload.type"], "reading": "/".join(p.loc[run_id, list(READING)]),
                      "size": float(p.at[run_id, "workload.size"]), "jobs": int(p.at[run_id, "workload.jobs"]),
                      "seed": int(p.at[run_id, "seed"]), **stats,
                      **{name: float(logged.at[run_id, metric]) for name, metric in LOGGED.items()}})
    return pd.DataFrame(lines)


def tables(stats: pd.DataFrame) -> str:
    """The two markdown tables: each statistic a mean over seeds ± 95 % CI (``± —`` for one seed); a statistic
    that is NaN in a run (``late median`` without late workflows) is averaged over the runs that have it."""
    cells = aggregate(stats, ROWS[1:], ["workload"], [*STATS, *LOGGED]).rename(columns={COLUMN: "workload"})
    seeds = stats.groupby(ROWS)["seed"].nunique().rename("seeds")
    out = []
    for title, columns in TABLES:
        head = ["workload", "reading", "size", "jobs", "seeds", *columns]
        lines = [f"**{title}**", "", "| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
        for key, group in cells.groupby(ROWS, sort=True):
            by = group.set_index("metric")
            row = [str(key[0]), str(key[1]), f"{key[2]:g}", f"{key[3]:,}", str(seeds.loc[key])]
            row += [format_pm(by.at[c, "mean"], by.at[c, "half_width"], int(by.at[c, "n"])) for c in columns]
            lines.append("| " + " | ".join(row) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--experiment", default=EXPERIMENT)
    args = parser.parse_args(argv)
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"  # as analysis/report.py: the terminal holds the tables
    try:
        print(tables(run_stats(args.tracking_uri, args.experiment)), end="")
    except AnalysisError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
