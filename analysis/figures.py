"""Seaborn figures, each written as PNG and PDF (matplotlib's Agg backend; no screen needed).

Every figure is one function ``plot_<name>(data, out, stem=…, …) -> list[Path]`` that takes a
plain DataFrame, draws inside :func:`_style`, and ends with :func:`save` — add a figure by
writing one more such function (see :func:`plot_dominant_shares`, the shortest).
A metric keeps the unit the tables give it (seconds for times, with thousands separators), so a
number read off a figure is the number in the table; only the time axis of a schedule (Gantt,
utilisation) switches to hours for long spans (:func:`time_unit`). Factor levels that are file paths
are drawn by their short name (``KTH-SP2-1996-2.1-cln``, :func:`short_names`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, no screen

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.collections import PatchCollection
from matplotlib.patches import Patch, Rectangle

from analysis.formatting import metric_label, metric_unit
from analysis.timeline import assign_nodes, busy_steps, time_unit
from sim.stats import CONFIDENCE, t_half_width

FORMATS = ("png", "pdf")
DPI = 150
#: a utilisation curve with more steps than this is drawn as time-weighted means over this many bins
UTIL_BINS = 400
#: the Gantt window ends when this share of the drawn jobs have ended (a long job must not squash the rest)
GANTT_WINDOW_QUANTILE = 0.9
_TRACE_SUFFIXES = (".gz", ".swf", ".csv", ".parquet")


def short_names(values: pd.Series) -> pd.Series:
    """Path-like levels (``traces/KTH-SP2-1996-2.1-cln.swf``) as their file stem, when stems stay distinct.

    >>> short_names(pd.Series(["traces/KTH.swf", "/data/NASA.swf.gz", "traces/KTH.swf"])).tolist()
    ['KTH', 'NASA', 'KTH']
    >>> short_names(pd.Series(["a/x.swf", "b/x.swf"])).tolist()  # stems would collide: kept whole
    ['a/x.swf', 'b/x.swf']
    """
    levels = [v for v in pd.unique(values) if isinstance(v, str)]
    if not any("/" in v for v in levels):
        return values
    def stem(text: str) -> str:
        name = Path(text).name
        while name.endswith(_TRACE_SUFFIXES):
            name = name.rsplit(".", 1)[0]
        return name
    mapping = {v: stem(v) for v in levels}
    if len(set(mapping.values())) < len(mapping):
        return values
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.rename_categories(lambda v: mapping.get(v, v))
    return values.map(lambda v: mapping.get(v, v))


def _shorten(data: pd.DataFrame, *columns: str | None) -> pd.DataFrame:
    for column in dict.fromkeys(c for c in columns if c):
        if not pd.api.types.is_numeric_dtype(data[column]):
            data[column] = short_names(data[column])
    return data


def _seconds_axis(axis: matplotlib.axis.Axis) -> None:
    """Seconds as plain numbers with thousands separators (``86,400``), never an offset like ``1e5``."""
    axis.set_major_formatter(mticker.StrMethodFormatter("{x:,.0f}"))


def save(fig: plt.Figure, out: Path, stem: str) -> list[Path]:
    """Write ``fig`` as ``out/stem.png`` and ``out/stem.pdf`` (reproducible PDF metadata), close it."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in FORMATS:
        path = out / f"{stem}.{ext}"
        metadata = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        fig.savefig(path, dpi=DPI, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    plt.close(fig)
    return paths


@contextmanager
def _style() -> Iterator[None]:
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        yield


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """Seaborn ``errorbar`` callable: mean ± Student-t half-width (a point for n = 1)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    mean = float(v.mean())
    half = float(t_half_width(v.std(ddof=1), len(v), CONFIDENCE)) if len(v) > 1 else 0.0
    return mean - half, mean + half


def plot_metric_vs_factor(
    design: pd.DataFrame, x: str, metric: str, hue: str, out: Path, stem: str, facet: str | None = None
) -> list[Path]:
    """Mean ``metric`` per level of ``x`` (one line per ``hue`` level) with 95% t-CI error bars.

    ``design`` has one row per run. A numeric ``x`` gets a numeric axis (log when its levels
    span two decades or more); other factors are categorical. ``facet`` splits into panels.
    """
    data = _shorten(design.dropna(subset=[metric]).copy(), x, hue, facet)
    unit = metric_unit(metric)
    ylabel = f"{metric} ({unit})" if unit else metric
    numeric = pd.api.types.is_numeric_dtype(data[x])
    common = {"data": data, "x": x, "y": metric, "hue": hue, "col": facet, "errorbar": t_interval,
              "height": 3.6, "aspect": 1.35}
    with _style():
        if numeric:
            grid = sns.relplot(kind="line", marker="o", err_style="bars", err_kws={"capsize": 3}, **common)
            levels = data[x][data[x] > 0]
            if len(levels) and levels.min() > 0 and levels.max() / levels.min() >= 100:
                grid.set(xscale="log")
        else:
            grid = sns.catplot(kind="point", dodge=0.25, capsize=0.08, linestyle="none", **common)  # nominal: no lines
        grid.set_axis_labels(x, ylabel)
        if unit == "s":
            for ax in grid.axes.flat:
                _seconds_axis(ax.yaxis)
        if not numeric and sum(len(str(v)) for v in data[x].unique()) > 40:  # long levels: slant, no overlap
            for ax in grid.axes.flat:
                ax.tick_params(axis="x", labelrotation=25)
                for label in ax.get_xticklabels():
                    label.set_horizontalalignment("right")
        n = data.groupby([x, hue, *([facet] if facet else [])], observed=True)[metric].count()
        bare = "; no bar where n = 1" if n.min() == 1 else ""
        grid.figure.suptitle(f"{metric_label(metric).split(' (')[0]} vs {x}: mean ± 95% CI (t), "
                             f"n = {_span(n)} runs per point{bare}", y=1.03)
        if grid.legend is not None:
            grid.legend.set_title(hue)
        return save(grid.figure, out, stem)


def plot_wait_ecdf(waits: pd.DataFrame, hue: str, out: Path, stem: str, facet: str | None = None,
                   available: pd.Series | None = None, per: str = "replications per cell", missing: int = 0,
                   ) -> list[Path]:
    """ECDF of per-job waits (column ``wait``, seconds), one curve per ``hue`` level.

    ``waits`` pools the jobs of the runs (column ``run``) drawn for each curve; ``available`` counts
    the runs each curve could have drawn (index: the ``hue`` level, or ``(hue, facet)`` levels;
    default: the drawn ones); ``missing`` runs were left out for want of a jobs table. The title
    states the sample — runs drawn of those available ``per`` curve, jobs, runs left out — so a
    figure pasted on its own still says what it shows. ``facet`` splits into panels, each with its
    own wait axis (traces differ by orders of magnitude) titled ``factor = level``.
    """
    unstarted = int(waits["wait"].isna().sum())
    data = _shorten(waits.dropna(subset=["wait"]).reset_index(drop=True), hue, facet)
    curves = [hue, *([facet] if facet else [])]
    drawn = waits.groupby(curves, observed=True)["run"].nunique()
    have = drawn if available is None else available.reindex(drawn.index)
    sample = f"{sample_text(drawn, have, per)}, {len(data):,} jobs"
    sample += f" ({unstarted:,} that never started left out)" if unstarted else ""
    sample += f"; {missing} run{'s' if missing > 1 else ''} without a jobs table left out" if missing else ""
    with _style():
        grid = sns.displot(data=data, x="wait", hue=hue, col=facet, kind="ecdf", height=3.6, aspect=1.35,
                           col_wrap=3 if facet and data[facet].nunique() > 3 else None,
                           facet_kws={"sharex": False})
        grid.set_axis_labels("wait (s)", "proportion of jobs")
        grid.set(ylim=(0, 1.02))
        if facet:
            grid.set_titles("{col_var} = {col_name}")
        for ax in grid.axes.flat:
            _seconds_axis(ax.xaxis)
            ax.tick_params(axis="x", labelrotation=20)
        grid.figure.suptitle(f"Per-job wait, ECDF\n{sample}", y=1.08)
        if grid.legend is not None:
            grid.legend.set_title(hue)
        return save(grid.figure, out, stem)


def sample_text(drawn: pd.Series, available: pd.Series, per: str = "replications per cell") -> str:
    """How many runs a figure drew per curve (or point) of how many there are.

    >>> sample_text(pd.Series([10, 10]), pd.Series([60, 60]))
    '10 of 60 replications per cell'
    >>> sample_text(pd.Series([3, 2]), pd.Series([3, 2]))
    'all 2–3 replications per cell'
    """
    if drawn.tolist() == available.tolist():
        return f"all {_span(available)} {per}"
    return f"{_span(drawn)} of {_span(available)} {per}"


def plot_gantt(
    jobs: pd.DataFrame, out: Path, stem: str, first_n: int = 40, capacity: int | None = None,
    resource: str = "nodes", title: str = "",
) -> list[Path]:
    """Node ranges over time of the first ``first_n`` jobs (by submit time) of one schedule, under
    ``title`` (the run) and a line saying which of its jobs are drawn.

    Node ids come from :func:`analysis.timeline.assign_nodes` over the whole run; other jobs
    running in the same window are drawn in grey so free and busy nodes are told apart. The window
    ends when :data:`GANTT_WINDOW_QUANTILE` of the drawn jobs have ended, so one long job does not
    squash the others into slivers: longer jobs run on past the right edge.
    """
    blocks = assign_nodes(jobs, capacity, resource)
    capacity = capacity or int((blocks["first_node"] + blocks["n_nodes"]).max())
    ran = jobs[jobs["job_id"].isin(blocks["job_id"])]
    chosen = list(ran.sort_values(["submit_time", "job_id"])["job_id"].iloc[:first_n])
    mine = blocks[blocks["job_id"].isin(chosen)]
    t0 = float(mine["start_time"].min())
    t1 = max(float(mine.groupby("job_id")["end_time"].max().quantile(GANTT_WINDOW_QUANTILE)),
             float(mine["start_time"].max()), t0 + 1.0)
    clipped = int((mine.groupby("job_id")["end_time"].max() > t1).sum())
    others = blocks[~blocks["job_id"].isin(chosen) & (blocks["end_time"] > t0) & (blocks["start_time"] < t1)]
    unit, scale = time_unit(t1 - t0)
    colours = dict(zip(chosen, sns.color_palette("husl", len(chosen)), strict=True))
    with _style():
        fig, ax = plt.subplots(figsize=(9, 4.8))
        for frame, colour_of, alpha in ((others, lambda _: "0.82", 1.0), (mine, colours.get, 0.9)):
            patches = [Rectangle((s / scale, f), (e - s) / scale, n) for s, e, f, n in
                       zip(frame["start_time"], frame["end_time"], frame["first_node"], frame["n_nodes"], strict=True)]
            ax.add_collection(PatchCollection(patches, facecolor=[colour_of(j) for j in frame["job_id"]],
                                              edgecolor="white", linewidth=0.4, alpha=alpha))
        _label_blocks(ax, mine, scale, (t0, t1), capacity)
        ax.set_xlim(t0 / scale, t1 / scale)
        ax.set_ylim(0, capacity)
        ax.set_xlabel(f"time ({unit})")
        noun = "node" if resource == "nodes" else resource
        ax.set_ylabel(f"{noun} index (0–{capacity - 1})")
        of = f"{len(ran)} jobs" if len(ran) == len(jobs) else f"the {len(ran)} jobs that ran (of {len(jobs)})"
        more = f"; {clipped} run on past the right edge" if clipped else ""
        ax.set_title(f"{title or 'Schedule'}\nfirst {len(chosen)} of {of} by submit time, {noun} ranges over "
                     f"time{more}")
        handles = [Patch(color=colours[chosen[0]], label=f"first {len(chosen)} jobs\n(one colour each)")]
        if len(others):
            handles.append(Patch(color="0.82", label="other jobs"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
        return save(fig, out, stem)


def _label_blocks(ax: plt.Axes, mine: pd.DataFrame, scale: float, window: tuple[float, float], capacity: int) -> None:
    """Write the job id on the visible part of its largest block when that part is big enough to hold it.

    Labels are clipped to the axes: a label outside them would stretch the saved figure.
    """
    t0, t1 = window
    for job_id, group in mine.groupby("job_id"):
        block = group.loc[group["n_nodes"].idxmax()]
        left, right = max(block["start_time"], t0), min(block["end_time"], t1)
        if right - left > 0.04 * (t1 - t0) and block["n_nodes"] > 0.04 * capacity:
            ax.text((left + right) / 2 / scale, block["first_node"] + block["n_nodes"] / 2, str(job_id),
                    ha="center", va="center", fontsize=7, clip_on=True)


def plot_utilisation(
    jobs: pd.DataFrame, out: Path, stem: str, capacities: dict[str, float | None], title: str = ""
) -> list[Path]:
    """Busy share of each resource over time (step plot), capacity ``None`` meaning the peak.

    The title ends with the time-weighted mean from first submit to last end (the ``util`` metric).
    A curve of more than :data:`UTIL_BINS` steps (a long trace) is drawn as the time-weighted mean
    of each of :data:`UTIL_BINS` equal bins, a line rather than a solid block; the title says so.
    """
    lines, means, binned = [], [], False
    start, end = float(jobs["submit_time"].min()), float(jobs["end_time"].max())
    for resource, capacity in capacities.items():
        steps = busy_steps(jobs, resource)
        total = capacity or float(steps["busy"].max()) or 1.0
        name = f"{resource} (of {total:g})" if capacity else f"{resource} (of peak {total:g})"
        times = np.concatenate([[start], steps["time"].to_numpy(), [end]])
        share = np.concatenate([[0.0], steps["busy"].to_numpy() / total, [0.0]])
        means.append(f"{resource} {float(np.sum(share[:-1] * np.diff(times)) / max(end - start, 1e-12)):.3f}")
        if len(times) > UTIL_BINS:
            times, share, binned = *binned_steps(times, share, UTIL_BINS), True
        lines.append(pd.DataFrame({"time": times, "utilisation": share, "resource": name}))
    data = pd.concat(lines, ignore_index=True)
    unit, scale = time_unit(end - start)

    data["time"] = data["time"] / scale
    with _style():
        fig, ax = plt.subplots(figsize=(9, 3.6))
        sns.lineplot(data=data, x="time", y="utilisation", hue="resource", drawstyle="steps-post", ax=ax,
                     estimator=None, errorbar=None, linewidth=1.2)
        ax.set_ylim(0, 1.05)
        ax.set_xlim(start / scale, end / scale)
        ax.set_xlabel(f"time ({unit})")
        ax.set_ylabel("utilisation (busy / capacity)")
        ax.legend(title="resource (capacity)", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        width = (end - start) / UTIL_BINS / scale
        how = f"\ndrawn as time-weighted means over {UTIL_BINS} bins of {width:.3g} {unit}" if binned else ""
        ax.set_title(f"{title or 'Utilisation over time'}\nall {len(jobs):,} jobs; time-weighted mean from first "
                     f"submit to last end: {', '.join(means)}{how}")
        return save(fig, out, stem)


def binned_steps(times: np.ndarray, share: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """A step function (``share[i]`` from ``times[i]`` to ``times[i + 1]``) as its time-weighted mean
    over ``bins`` equal bins, returned as steps at the bin starts (plus the end, value 0).

    >>> binned_steps(np.array([0.0, 1, 2, 4]), np.array([1.0, 0, 0.5, 0]), 2)
    (array([0., 2., 4.]), array([0.5, 0.5, 0. ]))
    """
    edges = np.linspace(times[0], times[-1], bins + 1)
    area = np.concatenate([[0.0], np.cumsum(share[:-1] * np.diff(times))])  # ∫ share up to each time
    at_edges = np.interp(edges, times, area)  # the integral is piecewise linear between step times
    means = np.diff(at_edges) / np.diff(edges)
    return edges, np.concatenate([means, [0.0]])


def plot_dominant_shares(shares: pd.DataFrame, out: Path, stem: str = "dominant_shares", title: str = "",
                         facet: str | None = None) -> list[Path]:
    """DRF dominant share of each user over time (``dominant_shares.parquet``: time, user, dominant_share),
    one panel per level of ``facet`` (e.g. the policy) when given."""
    data = shares.sort_values("time").copy()
    unit, scale = time_unit(float(data["time"].max() - data["time"].min()) if len(data) else 0.0)
    data["time"] = data["time"] / scale
    styled = {"style": "user"} if data["user"].nunique() <= 6 else {}  # dashes keep equal shares apart
    panels = ({"col": facet, "col_wrap": min(3, data[facet].nunique()), "col_order": sorted(data[facet].unique())}
              if facet else {})
    with _style():
        grid = sns.relplot(data=data, x="time", y="dominant_share", hue="user", kind="line", drawstyle="steps-post",
                           estimator=None, errorbar=None, height=3.2, aspect=1.6 if facet else 2.2,
                           facet_kws={"sharex": True, "sharey": True}, **styled, **panels)
        grid.set(ylim=(0, 1.05))
        grid.set_axis_labels(f"time ({unit})", "dominant share")
        if facet:
            grid.set_titles(f"{facet} = {{col_name}}")
        grid.figure.suptitle(title or "Dominant share per user over time", y=1.03)
        return save(grid.figure, out, stem)


def _span(counts: pd.Series) -> str:
    lo, hi = int(counts.min()), int(counts.max())
    return f"{lo}" if lo == hi else f"{lo}–{hi}"
