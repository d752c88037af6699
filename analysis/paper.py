"""``make paper``'s second half: every paper table from its runs, beside the published values.

Usage::

    python analysis/paper.py                          # every conf/experiment/paper_*.yaml → docs/paper/
    python analysis/paper.py --only 'paper_ligo_*' workload.jobs=300 --out /tmp/quick   # a quick look's runs
    python analysis/paper.py --tracking-uri sqlite:////tmp/a/mlflow.db --tracking-uri sqlite:////tmp/b/mlflow.db
                                                      # each experiment's runs from both stores
    python analysis/paper.py --export-runs docs/paper/runs.parquet --tracking-uri …   # the runs, as data
    python analysis/paper.py --runs docs/paper/runs.parquet --out /tmp/again          # the tables, without MLflow

For each ``paper_<id>.yaml`` (its ``paper:`` block, see :mod:`analysis.paper_spec`) it reads the
runs of its ``experiment_name``, keeps the ones that belong to the table (below), and writes
``<out>/<id>.md``, ``<id>.tex`` and ``<id>.csv`` — rows = the varied factor, columns = each metric
per configuration, every cell ``ours (n) · paper`` — ``<out>/figures/<id>.png`` and, over all
tables, ``<out>/claims.{md,csv}`` (:mod:`analysis.claims`) and ``<out>/tables.md`` (an index, then
how close each table comes to the published values, :mod:`analysis.agreement`).
Means and CIs come from :func:`analysis.stats.aggregate`; nothing here re-runs a simulation. The runs
come from MLflow or from a run export (:mod:`analysis.export`), through the same
:meth:`analysis.runs.RunSet.from_records`: the same tables, byte for byte.

Several tables may share one experiment (the factor-at-a-time tables of one workload do, so their
common default point runs once). A table's runs are then those whose other factors sit at the
level common to every level of its row factor — the default point; a key that varies inside a
cell with no such common level is an error (give the table its own ``experiment_name``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import pandas as pd

from analysis import AnalysisError
from analysis.agreement import agreement_markdown
from analysis.claims import claims_markdown, evaluate, overall
from analysis.export import RunExport, write_export
from analysis.formatting import caption, format_pm, significant, to_latex, to_markdown
from analysis.paper_result import TableResult, display, row_text, tidy
from analysis.paper_spec import PaperTable, level_key, load_tables
from analysis.runs import RUN_KEY_TAG, SEED_KEY, RunSet, default_tracking_uri, load_runs
from analysis.stats import COLUMN, aggregate, level_text
from analysis.summary import code_notes

NOT_RUN = "not run"
#: overrides that choose how a sweep runs, not which runs it makes (never run filters)
BOOKKEEPING = ("replications", "tracking", "sweep", "experiment_name", "experiment", "seed")


def paper_text(mean: float, half: float, scale: float) -> str:
    """A published value as the paper prints it: ``0.11 ± 0.01`` (no ± when it gives none).

    >>> paper_text(0.0011, 0.0001, 100.0), paper_text(17544.0, float("nan"), 1.0)
    ('0.11 ± 0.01', '17544')
    """
    text = significant(mean * scale)
    return text + (f" ± {significant(half * scale)}" if math.isfinite(half) else "")


def run_filters(overrides: list[str]) -> dict[str, str]:
    """The ``key=value`` sweep overrides that pick runs (``workload.jobs=300``); Hydra's own keys,
    group choices and bookkeeping keys (``replications``, ``tracking.*`` …) pick none.

    >>> run_filters(["workload.jobs=300", "replications=2", "hydra/launcher=serial", "++cluster.m=40"])
    {'workload.jobs': '300', 'cluster.m': '40'}
    """
    out = {}
    for text in overrides:
        key, sep, value = text.lstrip("+~").partition("=")
        if sep and "/" not in key and not key.startswith("hydra") and not any(
                key == p or key.startswith(p + ".") for p in BOOKKEEPING):
            out[key] = value
    return out


def table_design(runs: RunSet, table: PaperTable, seed_key: str = SEED_KEY,
                 filters: dict[str, str] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The table's runs (factor columns, seed, metrics, ``config`` label) and notes on the selection.

    ``filters`` (config key → value, see :func:`run_filters`) keep only matching runs; a key the
    runs do not have is ignored (it belongs to another table's workload).
    """
    params = runs.params
    for key, value in (filters or {}).items():
        if key in params:
            params = params[params[key].map(level_key) == level_key(value)]
    if params.empty:
        raise AnalysisError(f"{table.source}: no run of experiment {table.experiment!r} matches {filters}")
    factors = table.factors
    absent = [k for k in factors if k not in params]
    if absent:
        raise AnalysisError(f"{table.source}: {', '.join(absent)} not a config key of the runs of experiment "
                            f"{table.experiment!r}")
    group = [*factors, seed_key]
    keep, notes = params, []
    for key in sorted(params.columns):
        if key in group:
            continue
        column = keep[key].map(level_key)
        if column.nunique() < 2 or column.groupby([keep[k].map(level_key) for k in group]).nunique().max() <= 1:
            continue  # constant, or an attribute of each cell (e.g. a workload's own arrival rate)
        if not table.rows:
            raise AnalysisError(f"{table.source}: runs of experiment {table.experiment!r} vary in {key} within a "
                                f"cell; give the table its own experiment_name")
        rows = keep[table.rows].map(level_key)
        common = set.intersection(*(set(column[rows == level]) for level in rows.unique()))
        counts = column[column.isin(common)].value_counts()
        if len(common) > 1 and counts.iloc[0] > counts.iloc[1]:
            # a factor-at-a-time design's default level hosts every other table's runs: the most runs
            common = {counts.index[0]}
        if len(common) != 1:
            raise AnalysisError(f"{table.source}: runs of experiment {table.experiment!r} vary in {key} "
                                f"({', '.join(sorted(set(column)))}) with no level common to every {table.rows} "
                                f"level; pick one with an override ({key}=…) or give the table its own "
                                f"experiment_name")
        level = common.pop()
        keep = keep[column == level]
        shared = "" if len(counts) == 1 else ", the level common to every row with the most runs"
        notes.append(f"{key} held at {level}{shared} (runs of the experiment's other tables left out)")
    named = []
    for key in (k for k in table.reading if k not in group):
        if key not in keep:
            raise AnalysisError(f"{table.source}: paper.reading: {key} is not a config key of the runs of "
                                f"experiment {table.experiment!r}")
        named.append(f"{key}={'|'.join(sorted({level_text(v) for v in keep[key].dropna()}))}")
    if named:
        notes.append(f"readings and scale: {', '.join(named)} (the seed leaves them open: docs/paper/selection.md)")
    design = runs.design(factors, [], seed_key).loc[keep.index]
    design = design.join(runs.metrics.reindex(columns=table.metrics).loc[keep.index])
    labels = design[table.configs].apply(lambda r: "/".join(level_text(v) for v in r), axis=1)
    return design.assign(config=labels), notes


def not_run_yet(error: AnalysisError) -> bool:
    """Whether ``error`` only says the experiment has no runs in that store yet (its table shows
    ``not run``), rather than that the store or its runs are broken."""
    return any(text in str(error) for text in ("unknown experiment", "no runs yet", "no MLflow store"))


def read_runs(experiment: str, tracking_uris: list[str], export: RunExport | None = None) -> RunSet:
    """The runs of ``experiment`` from the run ``export`` if given, else from every store that has it,
    concatenated (a store without the experiment, or without runs of it, adds none). A run key in two
    stores is refused: the same run counted twice would shrink the CIs, and which copy to keep is the
    user's call."""
    if export is not None:
        return export.runs(experiment)
    found: list[RunSet] = []
    missing: list[str] = []
    for uri in tracking_uris:
        try:
            found.append(load_runs(experiment, uri))
        except AnalysisError as exc:
            if not not_run_yet(exc):
                raise
            missing.append(str(exc))
    if not found:
        raise AnalysisError("; ".join(missing))
    if len(found) == 1:
        return found[0]
    owner: dict[str, str] = {}
    for runs in found:
        keys = runs.tags[RUN_KEY_TAG].dropna() if RUN_KEY_TAG in runs.tags else pd.Series(dtype=str)
        for key in keys:
            if key in owner:
                raise AnalysisError(f"run key {key} of experiment {experiment!r} is in two stores ({owner[key]} and "
                                    f"{runs.tracking_uri}); give each run one store")
            owner[key] = runs.tracking_uri
    dropped: dict[str, int] = {}
    for runs in found:
        for reason, n in runs.dropped.items():
            dropped[reason] = dropped.get(reason, 0) + n
    return RunSet.from_records(experiment, " + ".join(r.tracking_uri for r in found),
                               pd.concat([r.records for r in found]), pd.concat([r.failed for r in found]), dropped)


def analyse_table(table: PaperTable, tracking_uris: list[str], pool_code: bool = False,
                  filters: dict[str, str] | None = None, export: RunExport | None = None) -> TableResult:
    """Our numbers for one table from every store in ``tracking_uris`` or from ``export`` (:func:`read_runs`;
    an empty summary when no store has runs of its experiment yet)."""
    rows = [table.rows] if table.rows else []
    try:
        runs = read_runs(table.experiment, tracking_uris, export)
    except AnalysisError as exc:
        if not not_run_yet(exc):
            raise
        empty = pd.DataFrame(columns=[*rows, COLUMN, "metric", "mean", "sd", "n", "half_width"])
        return TableResult(table, pd.DataFrame(), empty, evaluate(table, pd.DataFrame()), [], [f"{NOT_RUN}: {exc}"])
    design, notes = table_design(runs, table, SEED_KEY, filters)
    notes += code_notes(runs, design, rows, ["config"], pool_code)
    codes = sorted(set(runs.code_fingerprints().loc[design.index]))
    summary = aggregate(design, rows, ["config"], table.metrics)
    return TableResult(table, design, summary, evaluate(table, design), codes, notes)


def _lookup(result: TableResult) -> tuple[dict[str, str], dict[tuple, pd.Series], dict[tuple, pd.Series]]:
    """The row levels (key → text, in order) and our / the paper's values by (level, config, metric)."""
    table, summary, published = result.table, result.summary, result.table.published
    ours = {(level_key(r[table.rows]) if table.rows else "all", r[COLUMN], r["metric"]): r
            for _, r in summary.iterrows()}
    paper = {(level_key(r["row"]) if table.rows else "all", r["config"], r["metric"]): r
             for _, r in published.iterrows()}
    levels: dict[str, str] = {}
    if table.rows:
        values = [*summary[table.rows].tolist(), *published["row"].tolist()]
        for value in sorted(values, key=_sort_key):
            levels.setdefault(level_key(value), row_text(value))
    else:
        levels["all"] = "all runs"
    return levels, ours, paper


def _ours_text(mine: pd.Series | None, scale: float) -> str:
    if mine is None or mine["n"] <= 0:
        return NOT_RUN
    return format_pm(mine["mean"] * scale, mine["half_width"] * scale, int(mine["n"])) + f" (n={int(mine['n'])})"


def cells(result: TableResult) -> pd.DataFrame:
    """The table in the paper's shape: one row per factor level, ``(metric, config)`` columns,
    each cell ``ours ± CI (n=…) · paper …`` (``paper —`` where the paper gives no value)."""
    levels, ours, paper = _lookup(result)
    grid = {}
    for metric in result.table.metrics:
        name, unit, scale = display(metric)
        for config in result.configs:
            column = []
            for level in levels:
                text = _ours_text(ours.get((level, config, metric)), scale)
                theirs = paper.get((level, config, metric))
                text += " · paper " + (paper_text(theirs["mean"], theirs["halfwidth"], scale)
                                       if theirs is not None else "—")
                column.append(text)
            grid[(f"{name} ({unit})" if unit else name, config)] = column
    frame = pd.DataFrame(grid, index=[(t,) for t in levels.values()])
    frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["metric", COLUMN])
    return frame


def long_cells(result: TableResult) -> pd.DataFrame:
    """The table in long form (``paper.layout: long``, for many factors): one line per row level and
    configuration, each config key its own index column, per metric an ``ours`` column and — only when
    the table has published values — a ``paper`` column, empty where the paper gives none."""
    levels, ours, paper = _lookup(result)
    sides = ["ours", "paper"] if paper else ["ours"]
    index, lines = [], []
    for level, text in levels.items():
        for config in result.configs:
            if not any((level, config, m) in ours or (level, config, m) in paper for m in result.table.metrics):
                continue
            parts = config.split("/")
            index.append((text, *(parts if len(parts) == len(result.table.configs) else [config])))
            line = []
            for metric in result.table.metrics:
                scale = display(metric)[2]
                theirs = paper.get((level, config, metric))
                line += [_ours_text(ours.get((level, config, metric)), scale),
                         *([paper_text(theirs["mean"], theirs["halfwidth"], scale) if theirs is not None else ""]
                           if paper else [])]
            lines.append(line)
    names = [f"{n} ({u})" if u else n for n, u, _ in map(display, result.table.metrics)]
    columns = pd.MultiIndex.from_tuples([(n, s) for n in names for s in sides], names=["metric", COLUMN])
    return pd.DataFrame(lines, index=index, columns=columns)


def _sort_key(value: object) -> tuple[int, float, str]:
    try:
        return 0, float(str(value)), ""
    except ValueError:
        return 1, 0.0, str(value)


def table_caption(result: TableResult) -> str:
    """What the cells are, n, the code the runs come from and the selection notes."""
    code = (f"; simulator code {', '.join(c[:12] for c in result.codes)}" if result.codes else "")
    ours = caption(result.summary, "ours: mean ± 95% CI half-width (Student t)") if len(result.summary) else NOT_RUN
    notes = "".join(f"; {n}" for n in result.notes)
    where = f"docs/paper/published/{result.table.id}.csv"
    return f"{result.table.title}. {ours}; paper: as published ({where}){code}{notes}"


def write(results: list[TableResult], out: Path, figures: bool = True) -> list[Path]:
    """Every table (Markdown, LaTeX, CSV, figure), the claims and the index under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written, index = [], [f"# Paper tables ({len(results)})", "",
                          "Generated by `make paper` (analysis/paper.py); how to read them: README.md.", ""]
    for result in results:
        tid, text = result.table.id, table_caption(result)
        long = result.table.layout == "long"
        frame = long_cells(result) if long else cells(result)
        label = [result.table.rows or "", *(result.table.configs if long else [])]
        (out / f"{tid}.md").write_text(f"## {result.table.title}\n\n{to_markdown(frame, label)}\n\n{text}\n")
        (out / f"{tid}.tex").write_text(to_latex(frame, label, text, f"tab:paper-{_slug(tid)}"))
        tidy(result).to_csv(out / f"{tid}.csv", index=False)
        written.append(out / f"{tid}.md")
        n = int(result.summary["n"].max()) if len(result.summary) else 0
        index.append(f"- [{result.table.title}]({tid}.md) — n = {n or NOT_RUN}, "
                     f"{len(result.table.published)} published values")
        numeric = all(_sort_key(v)[0] == 0 for v in result.summary.get(result.table.rows or "", []))
        if figures and result.rows and len(frame) > 1 and numeric:  # categorical rows (workload.type): no figure
            from analysis.paper_figures import draw  # matplotlib only when drawing

            draw(result, out / "figures" / f"{tid}.png")
            index[-1] += f", [figure](figures/{tid}.png)"
    claims = pd.concat([r.claims for r in results], ignore_index=True) if results else pd.DataFrame()
    claims.to_csv(out / "claims.csv", index=False)
    quotes = {(r.table.id, c.text): c.quote for r in results for c in r.table.claims if c.quote}
    (out / "claims.md").write_text(claims_markdown(claims, quotes) + "\n")
    section = agreement_markdown(results)
    (out / "tables.md").write_text("\n".join(index) + "\n" + (f"\n{section}" if section else ""))
    return [*written, out / "claims.md", out / "tables.md"]


def export_runs(tables: list[PaperTable], tracking_uris: list[str], export: RunExport | None, path: Path) -> str:
    """Write the runs of the tables' experiments (every FINISHED run :func:`read_runs` gives) to ``path``
    (:mod:`analysis.export`); returns a one-line account."""
    found, absent = [], []
    for experiment in dict.fromkeys(t.experiment for t in tables):
        try:
            found.append(read_runs(experiment, tracking_uris, export))
        except AnalysisError as exc:
            if not not_run_yet(exc):
                raise
            absent.append(experiment)
    rows = write_export(found, path)
    return (f"wrote {path}: {rows} runs of {len(found)} experiment(s), {path.stat().st_size:,} bytes"
            + (f"; no runs yet: {', '.join(absent)}" if absent else ""))


def _override(overrides: list[str], key: str) -> str | None:
    """The value a ``key=value`` override gives (the sweeps' ``tracking.uri`` is ours too)."""
    values = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith(key + "=")]
    return values[-1] if values else None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="analysis/paper.py", description=__doc__.splitlines()[0])
    p.add_argument("--conf-dir", type=Path, default=Path("conf/experiment"), help="where paper_*.yaml are")
    p.add_argument("--published", type=Path, default=Path("docs/paper/published"), help="published values (<id>.csv)")
    p.add_argument("--out", type=Path, default=Path("docs/paper"), help="output folder (default: %(default)s)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--tracking-uri", action="append", default=[], metavar="URI",
                        help="MLflow store; repeat to read each experiment's runs from several stores (a run key in "
                             "two is refused; default: a tracking.uri= override, else sqlite:///<cwd>/mlflow.db)")
    source.add_argument("--runs", type=Path, metavar="FILE",
                        help="read the runs from a run export (--export-runs) instead of MLflow")
    p.add_argument("--export-runs", type=Path, metavar="FILE",
                   help="write the runs of the chosen tables' experiments to FILE (Parquet) instead of the tables")
    p.add_argument("--only", action="append", default=[], metavar="GLOB",
                   help="experiment file pattern as for sweeps/paper.py, e.g. 'paper_ligo_*' (default: all)")
    p.add_argument("--pool-code", action="store_true", help="pool a cell's runs across simulator-code fingerprints")
    p.add_argument("--no-figures", action="store_true", help="tables and claims only")
    p.add_argument("overrides", nargs="*", help="the sweeps' overrides: key=value ones keep only matching runs")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 with a one-line message on bad input)."""
    args = build_parser().parse_args(argv)
    try:
        tables = load_tables(args.conf_dir, args.published, args.only or None)
        export = RunExport.read(args.runs) if args.runs else None
        uris = args.tracking_uri or [_override(args.overrides, "tracking.uri") or default_tracking_uri()]
        filters = run_filters(args.overrides)
        if args.export_runs:
            if filters:
                raise AnalysisError(f"--export-runs writes every run; give the filters {filters} when building "
                                    "the tables from the export")
            print(export_runs(tables, uris, export, args.export_runs))
            return 0
        results = [analyse_table(t, uris, args.pool_code, filters, export) for t in tables]
        write(results, args.out, figures=not args.no_figures)
    except AnalysisError as exc:
        print(f"paper.py: error: {exc}", file=sys.stderr)
        return 2
    for r in results:
        n = int(r.summary["n"].max()) if len(r.summary) else 0
        print(f"{r.table.id:<20} {len(r.design):>4} runs  n ≤ {n:<3} {len(r.table.published):>3} published values"
              + (f"  ({r.notes[0]})" if r.notes and r.notes[0].startswith(NOT_RUN) else ""))
    claims = overall(pd.concat([r.claims for r in results], ignore_index=True))
    if len(claims):
        print("\n" + claims.to_string(index=False))
    print(f"\nwrote {args.out}/tables.md, claims.md and {len(results)} tables (.md .tex .csv"
          + ("" if args.no_figures else ", figures/*.png") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
