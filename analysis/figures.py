"""Seaborn figures, each written as PNG and PDF (matplotlib's Agg backend; no screen needed).

Every figure is one function ``plot_<name>(data, out, stem=…, …) -> list[Path]`` that takes a
plain DataFrame, draws inside :func:`_style`, and ends with :func:`save` — add a figure by
writing one more such function (see :func:`plot_dominant_shares`, the shortest).
Times are in seconds in the data; axes switch to hours for long spans (:func:`time_unit`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, no screen

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.collections import PatchCollection
from matplotlib.patches import Patch, Rectangle

from analysis.formatting import metric_label, metric_unit
from analysis.stats import CONFIDENCE, t_half_width
from analysis.timeline import assign_nodes, busy_steps, time_unit

FORMATS = ("png", "pdf")
DPI = 150


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
    data = design.dropna(subset=[metric]).copy()
    unit = metric_unit(metric)
    scale = 1.0
    if unit == "s":
        unit, scale = time_unit(float(data[metric].abs().max()))
        data[metric] = data[metric] / scale
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
        n = data.groupby([x, hue, *([facet] if facet else [])], observed=True)[metric].count()
        grid.figure.suptitle(
            f"{metric_label(metric).split(' (')[0]} vs {x}: mean ± 95% CI (t), n = {_span(n)} per point", y=1.03
        )
        if grid.legend is not None:
            grid.legend.set_title(hue)
        return save(grid.figure, out, stem)


def plot_wait_ecdf(waits: pd.DataFrame, hue: str, out: Path, stem: str, facet: str | None = None) -> list[Path]:
    """ECDF of per-job waits (column ``wait``, seconds), one curve per ``hue`` level.

    ``waits`` pools the jobs of every replication of a cell; ``facet`` splits into panels.
    """
    data = waits.dropna(subset=["wait"]).copy()
    unit, scale = time_unit(float(data["wait"].quantile(0.99)) if len(data) else 0.0)
    data["wait"] = data["wait"] / scale
    with _style():
        grid = sns.displot(data=data, x="wait", hue=hue, col=facet, kind="ecdf", height=3.6, aspect=1.35,
                           col_wrap=3 if facet and data[facet].nunique() > 3 else None)
        grid.set_axis_labels(f"wait ({unit})", "proportion of jobs")
        grid.set(ylim=(0, 1.02))
        grid.figure.suptitle(f"Per-job wait, ECDF over all replications ({len(data)} jobs)", y=1.03)
        if grid.legend is not None:
            grid.legend.set_title(hue)
        return save(grid.figure, out, stem)


def plot_gantt(
    jobs: pd.DataFrame, out: Path, stem: str, first_n: int = 40, capacity: int | None = None,
    resource: str = "nodes", title: str = "",
) -> list[Path]:
    """Node ranges over time of the first ``first_n`` jobs (by submit time) of one schedule.

    Node ids come from :func:`analysis.timeline.assign_nodes` over the whole run; other jobs
    running in the same window are drawn in grey so free and busy nodes are told apart.
    """
    blocks = assign_nodes(jobs, capacity, resource)
    capacity = capacity or int((blocks["first_node"] + blocks["n_nodes"]).max())
    order = jobs.sort_values(["submit_time", "job_id"])["job_id"]
    chosen = list(order.iloc[:first_n])
    mine = blocks[blocks["job_id"].isin(chosen)]
    t0, t1 = float(mine["start_time"].min()), float(mine["end_time"].max())
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
        _label_blocks(ax, mine, scale, (t1 - t0) / scale, capacity)
        ax.set_xlim(t0 / scale, t1 / scale)
        ax.set_ylim(0, capacity)
        ax.set_xlabel(f"time ({unit})")
        ax.set_ylabel(f"{'node' if resource == 'nodes' else resource} index (0–{capacity - 1})")
        ax.set_title(title or f"Schedule: first {len(chosen)} jobs, {resource} ranges over time")
        handles = [Patch(color=colours[chosen[0]], label=f"first {len(chosen)} jobs\n(one colour each)")]
        if len(others):
            handles.append(Patch(color="0.82", label="other jobs"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
        return save(fig, out, stem)


def _label_blocks(ax: plt.Axes, mine: pd.DataFrame, scale: float, width: float, capacity: int) -> None:
    """Write the job id on its largest block when the block is big enough to hold it."""
    for job_id, group in mine.groupby("job_id"):
        block = group.loc[group["n_nodes"].idxmax()]
        dx = (block["end_time"] - block["start_time"]) / scale
        if dx > 0.04 * width and block["n_nodes"] > 0.04 * capacity:
            ax.text((block["start_time"] / scale) + dx / 2, block["first_node"] + block["n_nodes"] / 2, str(job_id),
                    ha="center", va="center", fontsize=7)


def plot_utilisation(
    jobs: pd.DataFrame, out: Path, stem: str, capacities: dict[str, float | None], title: str = ""
) -> list[Path]:
    """Busy share of each resource over time (step plot), capacity ``None`` meaning the peak.

    The title ends with the time-weighted mean from first submit to last end (the ``util`` metric).
    """
    lines, means = [], []
    start, end = float(jobs["submit_time"].min()), float(jobs["end_time"].max())
    for resource, capacity in capacities.items():
        steps = busy_steps(jobs, resource)
        total = capacity or float(steps["busy"].max()) or 1.0
        name = f"{resource} (of {total:g})" if capacity else f"{resource} (of peak {total:g})"
        times = np.concatenate([[start], steps["time"].to_numpy(), [end]])
        share = np.concatenate([[0.0], steps["busy"].to_numpy() / total, [0.0]])
        lines.append(pd.DataFrame({"time": times, "utilisation": share, "resource": name}))
        means.append(f"{resource} {float(np.sum(share[:-1] * np.diff(times)) / max(end - start, 1e-12)):.3f}")
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
        ax.set_title(f"{title or 'Utilisation over time'}\ntime-weighted mean: {', '.join(means)}")
        return save(fig, out, stem)


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
