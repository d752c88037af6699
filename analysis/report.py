"""Paper-style CI tables, paired comparisons and figures from a sweep's MLflow runs (never re-runs).

Usage::

    python analysis/report.py --experiment schedlab-demo --rows workload.arrival_rate --cols policy \\
        --metrics wait/mean,bsld/mean --baseline easy --out reports/schedlab-demo
    python analysis/report.py --table-only    # print the CI table and paired comparison, write nothing

Factor names may be short (``arrival_rate`` →
``workload.arrival_rate``). Errors (unknown experiment, factor, metric …) are one line on stderr
and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import sys
import warnings
from pathlib import Path

from analysis import AnalysisError
from analysis.runs import DEFAULT_EXPERIMENT, SEED_KEY, default_tracking_uri, load_runs
from analysis.summary import DEFAULT_METRICS, POOL_CODE_FLAG, analyse, terminal_text


def build_parser() -> argparse.ArgumentParser:
    """The command line (every option has a default that matches ``make run``'s sweep)."""
    p = argparse.ArgumentParser(
        prog="analysis/report.py",
        description="CI tables (mean ± 95% t half-width), paired comparisons and figures from MLflow runs.",
        epilog="example: analysis/report.py --experiment schedlab-demo --rows workload.arrival_rate --cols policy "
               "--metrics wait/mean,bsld/mean --baseline easy --out reports/schedlab-demo",
    )
    p.add_argument("--experiment", default=DEFAULT_EXPERIMENT, help="MLflow experiment name (default: %(default)s)")
    p.add_argument("--tracking-uri", default=None,
                   help="MLflow tracking URI (default: sqlite:///<cwd>/mlflow.db, as the sweeps use)")
    p.add_argument("--sweep", default=None, metavar="ID|latest",
                   help="only runs tagged schedlab.sweep_id=ID ('latest': the newest sweep); default: all runs")
    p.add_argument("--rows", type=_names, default=None,
                   help="row factor(s), comma-separated config keys; default: every key that varies except options "
                        "that split a column (see --cols); '' for none")
    p.add_argument("--cols", type=_names, default=["policy"],
                   help="column factor(s) (default: policy); an option swept for some policies only "
                        "(policy.max_overtakes of yours beside easy) splits its policy's column into variants, "
                        "'capsjf max_overtakes=2', each paired with the baseline; naming it here does the same")
    p.add_argument("--metrics", type=_names, default=list(DEFAULT_METRICS),
                   help=f"comma-separated metrics (default: {','.join(DEFAULT_METRICS)})")
    p.add_argument("--baseline", default=None,
                   help="column level the others are paired against, e.g. easy; a policy with one variant may be "
                        "named by its label (default: the first in sorted order)")
    p.add_argument("--seed-key", default=SEED_KEY, help="the replication param (default: %(default)s)")
    p.add_argument(POOL_CODE_FLAG, action="store_true",
                   help="pool runs of one cell even when they come from different simulator code (schedlab.code)")
    p.add_argument("--out", type=Path, default=None, help="report folder (default: reports/<experiment>)")
    p.add_argument("--table-only", action="store_true", help="print the tables only; write nothing")
    p.add_argument("--gantt-run", default=None, metavar="RUN_ID",
                   help="run (id or unique prefix) for the Gantt/utilisation figures (default: the policy being "
                        "compared, not the baseline: the first other column level whose class is your own, not "
                        "schedlab's sim.*, else the first other level; its first row cell, lowest seed)")
    p.add_argument("--gantt-jobs", type=int, default=40, help="jobs drawn in the Gantt chart (default: %(default)s)")
    p.add_argument("--ecdf-runs", type=int, default=10,
                   help="replications per cell read for the wait ECDF (default: %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        runs = load_runs(args.experiment, args.tracking_uri or default_tracking_uri(), args.sweep)
        analysis = analyse(runs, args.rows, args.cols, args.metrics, args.baseline, args.seed_key, args.pool_code)
        print(terminal_text(analysis), flush=True)
        if args.table_only:
            return 0
        from analysis.assemble import write_report  # seaborn/matplotlib only when drawing

        out = args.out or Path("reports") / re.sub(r"[^A-Za-z0-9._-]+", "-", args.experiment)
        command = shlex.join(["python", "analysis/report.py", *(sys.argv[1:] if argv is None else argv)])
        path = write_report(analysis, out, args.gantt_run, args.gantt_jobs, args.ecdf_runs, command)
        figures = sorted(p.name for p in (out / "figures").glob("*.png"))
        print(f"\nreport: {path}  ({len(figures)} figures as PNG+PDF: {', '.join(figures)})")
    except AnalysisError as exc:
        print(f"report.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _names(text: str) -> list[str]:
    """``"a, b"`` → ``["a", "b"]``; ``""`` → ``[]``."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _quiet() -> None:
    """Keep the terminal to the tables: MLflow's logs and progress bars, library warnings off
    (process-wide, so only when run as a program)."""
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="seaborn")


if __name__ == "__main__":
    _quiet()
    sys.exit(main())
