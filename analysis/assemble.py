"""The report folder: figures drawn from the runs and their artifacts, and ``report.md`` embedding all.

``write_report(a, out)`` writes::

    out/report.md                   tables, figures, failed runs and how the numbers were made
    out/tables/{ci,paired}.{csv,tex,md}
    out/figures/*.{png,pdf}         metric vs factor, wait ECDF, Gantt, utilisation (+ DRF shares)

A figure that cannot be drawn (no ``jobs.parquet`` artifact, fractional resources …) becomes a
note in the report instead of an error: the tables never depend on artifacts.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis import AnalysisError
from analysis.figures import (
    GANTT_WINDOW_QUANTILE,
    UTIL_BINS,
    plot_dominant_shares,
    plot_gantt,
    plot_metric_vs_factor,
    plot_utilisation,
    plot_wait_ecdf,
    short_names,
)
from analysis.formatting import caption, to_markdown
from analysis.stats import column_labels, level_text
from analysis.summary import PAIRED_NOTE, Analysis, failed_lines, header, write_tables

JOB_COLUMNS = {"job_id", "submit_time", "start_time", "end_time", "time_limit", "wait", "bsld", "machine", "user",
               "workflow", "runtime", "turnaround", "deadline", "late"}
METHOD = (
    "Each cell is the mean over replications (seeds) ± the half-width of the two-sided 95% Student-t "
    "interval, t(0.975, n−1)·sd/√n (scipy.stats.t). Digits: the half-width keeps two significant digits "
    "and the mean is rounded to the same decimal place; a cell with n = 1 shows its mean and “—”. "
    "Paired differences subtract the baseline's run with the same seed and configuration (common random "
    "numbers: same seed, same jobs); n is then the number of pairs. Every cell shows its n. A difference is "
    "never marked significant from n < 2 or zero variance (identical replications, e.g. a trace replay that "
    "does not depend on the seed). Runs of one cell from different simulator code (schedlab.code) are "
    "refused unless --pool-code is given."
)


@dataclass
class Figure:
    """One figure of the report: its heading, files (PNG first) and a one-line caption."""

    title: str
    paths: list[Path]
    caption: str


def write_report(a: Analysis, out: Path, gantt_run: str | None = None, gantt_jobs: int = 40,
                 ecdf_runs: int = 10, command: str = "") -> Path:
    """Write tables, figures and ``report.md`` under ``out``; return the ``report.md`` path."""
    out.mkdir(parents=True, exist_ok=True)
    write_tables(a, out)
    folder = out / "figures"
    figures, notes = metric_figures(a, folder), list(a.notes)
    builders = (lambda: ecdf_figure(a, folder, ecdf_runs), lambda: schedule_figures(a, folder, gantt_run, gantt_jobs))
    for build in builders:
        try:
            figures += build()
        except AnalysisError as exc:
            notes.append(str(exc))
    path = out / "report.md"
    path.write_text(report_markdown(a, figures, notes, out, command))
    return path


def metric_figures(a: Analysis, folder: Path) -> list[Figure]:
    """One figure per metric: mean vs the first row factor, hue = column factor, panels = other rows."""
    data, hue = _labelled(a)
    x = a.rows[0] if a.rows else hue
    facet = None
    if len(a.rows) > 1:
        facet = ", ".join(a.rows[1:])
        data[facet] = _level_labels(a.design[a.rows[1:]])
    figures = []
    for metric in a.metrics:
        stem = f"{_slug(metric)}_vs_{_slug(x)}"
        paths = plot_metric_vs_factor(data, x, metric, hue, folder, stem, facet)
        drawn = "one line" if pd.api.types.is_numeric_dtype(data[x]) else "one marker"
        text = f"mean {metric} per {x}, {drawn} per {hue}, error bars: 95% t-CI (none where n = 1)"
        figures.append(Figure(f"{metric} vs {x}", paths, text))
    return figures


def ecdf_figure(a: Analysis, folder: Path, max_runs: int) -> list[Figure]:
    """Per-job waits from up to ``max_runs`` runs (lowest seeds) of each cell, one panel per first-row level."""
    data, hue = _labelled(a)
    facet = a.rows[0] if a.rows else None
    if facet:
        data[facet] = _level_labels(data[[facet]])
    keys = [hue, *([facet] if facet else [])]
    available = data.groupby(keys, observed=True).size()
    if a.seed_key in data:
        data = data.sort_values(a.seed_key)
    frames, missing = [], 0
    for run_id, row in data.groupby(keys, observed=True).head(max_runs).iterrows():
        jobs = a.runs.artifact_table(str(run_id))
        if jobs is None or "wait" not in jobs:
            missing += 1
            continue
        frames.append(pd.DataFrame({"wait": jobs["wait"].to_numpy(float), "run": str(run_id),
                                    **{k: row[k] for k in keys}}))
    if not frames:
        raise AnalysisError("no finished run has a jobs.parquet artifact with a wait column: no wait ECDF")
    waits = pd.concat(frames, ignore_index=True)
    for key in keys:
        waits[key] = pd.Categorical(waits[key], categories=data[key].cat.categories)
    pooled = f", pooled over {', '.join(a.rows[1:])}" if len(a.rows) > 1 else ""
    per = f"runs per curve{pooled}" if pooled else "replications per cell"
    lowest = " (lowest seeds)" if available.max() > max_runs and a.seed_key in data else ""
    paths = plot_wait_ecdf(waits, hue, folder, "wait_ecdf", facet, available, per + lowest, missing)
    note = f" ({missing} runs had no jobs.parquet)" if missing else ""
    panels = f"; one panel per {facet}, each with its own wait axis (s)" if facet else ""
    return [Figure("Per-job wait distribution", paths,
                   f"ECDF of job waits (s) from up to {max_runs} {per}{lowest}{panels}{note}")]


def schedule_figures(a: Analysis, folder: Path, run_id: str | None, first_n: int) -> list[Figure]:
    """Gantt chart and utilisation over time of one run (plus DRF dominant shares when logged)."""
    run = example_run(a, run_id)
    jobs = a.runs.artifact_table(run)
    if jobs is None:
        raise AnalysisError(f"run {run[:12]} has no jobs.parquet artifact: no Gantt or utilisation figure")
    keys = [k for k in dict.fromkeys([*a.cols, *a.rows, a.seed_key]) if k in a.design]
    who = ", ".join(f"{k}={short_names(pd.Series([level_text(a.design.loc[run, k])])).iloc[0]}" for k in keys)
    params = a.runs.params.loc[run]
    capacities = {r: _capacity(params, r) for r in resource_columns(jobs)}
    if not capacities:
        raise AnalysisError(f"run {run[:12]}: jobs.parquet has no resource column (e.g. nodes)")
    figures, short = [], run[:8]
    whole = [r for r in capacities if jobs[r].dropna().eq(jobs[r].dropna().round()).all()]
    if whole:
        resource = "nodes" if "nodes" in whole else whole[0]
        capacity = capacities[resource]
        paths = plot_gantt(jobs, folder, f"gantt_{short}", first_n, int(capacity) if capacity else None, resource,
                           f"Schedule of run {short} ({who})")
        figures.append(Figure(f"Schedule of run {short}", paths,
                              f"{who}; its first {first_n} jobs by submit time; {resource} ids assigned post hoc "
                              f"(lowest free ids first); grey: other jobs; the window ends when "
                              f"{GANTT_WINDOW_QUANTILE:.0%} of the drawn jobs have ended"))
    paths = plot_utilisation(jobs, folder, f"utilisation_{short}", capacities, f"Utilisation of run {short} ({who})")
    figures.append(Figure(f"Utilisation of run {short}", paths,
                          f"{who}; busy / total capacity over time (a run of more than {UTIL_BINS} steps is "
                          f"drawn as time-weighted means over {UTIL_BINS} equal bins)"))
    return figures + dominant_share_figures(a, folder, run)


def dominant_share_figures(a: Analysis, folder: Path, run: str) -> list[Figure]:
    """Dominant shares over time, a panel per column level (policy), for the row levels and seed of ``run``."""
    peers = a.design
    for key in [k for k in [*a.rows, a.seed_key] if k in a.design]:
        peers = peers[peers[key] == a.design.loc[run, key]]
    labels = column_labels(peers, a.cols)
    facet = " / ".join(a.cols)
    frames = []
    for peer in peers.index:
        shares = a.runs.artifact_table(peer, "dominant_shares.parquet")
        if shares is not None:
            frames.append(shares.assign(**{facet: f"{labels[peer]} (run {str(peer)[:8]})"}))
    if not frames:
        return []
    seed = f"{a.seed_key}={level_text(a.design.loc[run, a.seed_key])}" if a.seed_key in a.design else ""
    where = ", ".join(f"{k}={level_text(a.design.loc[run, k])}" for k in a.rows if k in a.design)
    context = ", ".join(p for p in (where, seed) if p)
    paths = plot_dominant_shares(pd.concat(frames, ignore_index=True), folder, "dominant_shares",
                                 f"Dominant share per user over time: one run per panel ({context}; same jobs in "
                                 "every panel)", facet)
    return [Figure("Dominant shares over time", paths,
                   f"{context}; one run per panel, one panel per {facet}; DRF dominant share of each user (max over "
                   "resources of its share of that resource)")]


def example_run(a: Analysis, run_id: str | None = None) -> str:
    """The run shown in the schedule figures: ``run_id`` (a prefix will do), else a run of the
    :func:`studied_level` at its first row levels with the lowest seed."""
    if run_id is not None:
        matches = [r for r in a.design.index if str(r).startswith(run_id)]
        if len(matches) != 1:
            raise AnalysisError(f"gantt run {run_id!r} matches {len(matches)} finished runs")
        return str(matches[0])
    design = a.design[column_labels(a.design, a.cols) == studied_level(a)]
    order = [k for k in [*a.rows, a.seed_key] if k in design]
    return str(design.sort_values(order).index[0] if order else design.index[0])


def studied_level(a: Analysis) -> str:
    """The column level being studied, not the baseline: the first other level whose runs use a class of
    the researcher's (a ``<column>._target_`` outside schedlab's ``sim.``), else the first other level
    (the only level when there is one)."""
    others = a.levels[1:] or a.levels
    labels = column_labels(a.design, a.cols)
    targets = [a.runs.params[key].reindex(a.design.index) for key in (f"{c}._target_" for c in a.cols)
               if key in a.runs.params]

    def own(level: str) -> bool:
        return any(not t[labels == level].dropna().astype(str).str.startswith("sim.").all() for t in targets)

    return next((level for level in others if own(level)), others[0])


def resource_columns(jobs: pd.DataFrame) -> list[str]:
    """Resource columns of a ``jobs.parquet`` (``nodes``; ``cpu``, ``mem`` …): numeric, not bookkeeping."""
    return [c for c in jobs.columns if c not in JOB_COLUMNS and pd.api.types.is_numeric_dtype(jobs[c])]


def report_markdown(a: Analysis, figures: list[Figure], notes: list[str], out: Path, command: str = "") -> str:
    """The text of ``report.md`` (figure and table links relative to ``out``)."""
    tags = a.runs.tags
    lines = [f"# schedlab report: experiment `{a.runs.experiment}`", ""]
    lines += [f"- {line}" for line in header(a).splitlines()]
    for tag, label in (("schedlab.sweep_id", "sweeps"), ("schedlab.git_commit", "git commits"),
                       ("schedlab.version", "schedlab versions")):
        if tag in tags:
            lines.append(f"- {label}: {', '.join(f'`{v}`' for v in sorted(tags[tag].dropna().unique()))}")
    if command:
        lines.append(f"- made by: `{command}`")
    lines += ["", "## Results: mean ± 95% CI half-width", "", to_markdown(a.ci_cells(), a.rows), "",
              f"*{caption(a.summary)}.* Files: [CSV](tables/ci.csv) · [LaTeX](tables/ci.tex)", ""]
    paired = a.paired_cells()
    if paired is not None:
        files = "Files: [CSV](tables/paired.csv) · [LaTeX](tables/paired.tex)"
        lines += [f"## Paired comparison with `{a.baseline}`", "", to_markdown(paired, a.rows), "",
                  f"*{caption(a.paired, PAIRED_NOTE, 'pairs')}.* {files}", ""]
    lines += ["## Figures", ""]
    for fig in figures:
        png, *others = [p.relative_to(out).as_posix() for p in fig.paths]
        lines += [f"### {fig.title}", "", f"![{fig.title}]({png})", "",
                  f"*{fig.caption}.* " + " · ".join(f"[{Path(p).suffix[1:].upper()}]({p})" for p in others), ""]
    if len(a.runs.failed):
        lines += [f"## Failed runs ({len(a.runs.failed)})", "", "```", *failed_lines(a), "```", ""]
    lines += ["## Method", "", METHOD, ""]
    if notes:
        lines += ["## Notes", "", *(f"- {n}" for n in notes), ""]
    return "\n".join(lines)


def _labelled(a: Analysis) -> tuple[pd.DataFrame, str]:
    """The design with the column-factor label (ordered as ``a.levels``) under its name."""
    hue = a.col_name
    data = a.design.copy()
    data[hue] = pd.Categorical(column_labels(a.design, a.cols), categories=a.levels)
    return data, hue


def _level_labels(values: pd.DataFrame) -> pd.Categorical:
    """Factor-level combinations as text (``"4, easy"``), ordered by the values (numbers numerically)."""
    labels = pd.Series([", ".join(level_text(v) for v in row) for row in values.itertuples(index=False)],
                       index=values.index)
    order = list(dict.fromkeys(labels.loc[values.sort_values(list(values.columns)).index]))
    return pd.Categorical(labels, categories=order)


def _capacity(params: pd.Series, resource: str) -> float | None:
    """Total capacity of ``resource`` from the run's config (``cluster.<resource>``), if logged."""
    for key in (f"cluster.{resource}", f"cluster.total.{resource}", f"cluster.capacity.{resource}"):
        value = params.get(key)
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")
