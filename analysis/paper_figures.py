"""One figure per paper table: each metric against the row factor, ours (mean ± 95 % CI, solid) and
the paper's published points (± its half-width, hollow, dashed) on the same axes, one colour per
configuration. A paper series shared by several of our configurations is drawn once. Under the
title, the figure says what its points are and over how many replications (:func:`sample_line`)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from analysis.paper_result import display, row_text
from analysis.stats import COLUMN

if TYPE_CHECKING:
    import pandas as pd

    from analysis.paper_result import TableResult


def draw(result: TableResult, path: Path) -> Path:
    """Write the table's figure (:func:`figure`) as PNG and return its path."""
    fig = figure(result)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figure(result: TableResult) -> plt.Figure:
    """The table's figure: one panel per metric, titled with the table and :func:`sample_line`."""
    table, summary, published = result.table, result.summary, result.table.published
    configs = result.configs
    colours = {c: plt.get_cmap("tab10")(i % 10) for i, c in enumerate(configs)}
    levels = sorted({float(v) for v in [*summary[table.rows].tolist(), *published["row"].astype(float).tolist()]})
    series = {c: tuple(map(tuple, published[published["config"] == c][["row", "metric", "mean"]].to_numpy()))
              for c in configs}
    alike = {c: [d for d in configs if series[d] and series[d] == series[c]] for c in configs}
    fig, axes = plt.subplots(1, len(table.metrics), figsize=(4.6 * len(table.metrics), 3.9), squeeze=False)
    for ax, metric in zip(axes[0], table.metrics, strict=True):
        name, unit, scale = display(metric)
        for config in configs:
            mine = summary[(summary[COLUMN] == config) & (summary["metric"] == metric) & (summary["n"] > 0)]
            if len(mine):
                mine = mine.sort_values(table.rows)
                ax.errorbar(mine[table.rows].astype(float), mine["mean"] * scale, yerr=mine["half_width"] * scale,
                            marker="o", capsize=3, color=colours[config], label=f"ours {config}")
            theirs = published[(published["config"] == config) & (published["metric"] == metric)].copy()
            if len(theirs):
                theirs["x"] = theirs["row"].astype(float)
                theirs = theirs.sort_values("x")
                if alike[config][0] != config:
                    continue  # the same published series as an earlier configuration's: drawn once
                ax.errorbar(theirs["x"], theirs["mean"] * scale, yerr=theirs["halfwidth"].fillna(0) * scale,
                            marker="s", markerfacecolor="none", linestyle="--", capsize=3, color=colours[config],
                            label=f"paper {merged_label(alike[config])}")
        ax.set_xticks(levels, [row_text(v) for v in levels], rotation=90 if crowded(levels) else 0)
        ax.set_xlabel(table.rows)
        ax.set_ylabel(f"{name} ({unit})" if unit else name)
        ax.set_title(name)
        ax.grid(alpha=0.3)
    handles, labels = legend_entries(axes[0])
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))), fontsize=8, frameon=False)
    fig.suptitle(f"{table.title}\n{sample_line(summary[summary['metric'].isin(table.metrics)])}", fontsize=10)
    fig.tight_layout(rect=(0, 0.06 + 0.04 * ((len(labels) - 1) // 4), 1, 0.93))
    return fig


def sample_line(summary: pd.DataFrame) -> str:
    """What the points are, with the replications behind ours (``n`` of the cells drawn).

    >>> import pandas as pd
    >>> sample_line(pd.DataFrame({"n": [10, 10, 3, 0]})).split("; ")[0]
    'ours (solid): mean ± 95% t-CI over n = 3–10 replications per point'
    """
    n = summary["n"][summary["n"] > 0]
    if n.empty:
        ours = "ours: not run"
    else:
        span = f"{n.min()}" if n.min() == n.max() else f"{n.min()}–{n.max()}"
        bare = ", no bar where n = 1" if n.min() == 1 else ""
        ours = f"ours (solid): mean ± 95% t-CI over n = {span} replications per point{bare}"
    return f"{ours}; paper (dashed, hollow): published value ± half-width where given"


def crowded(levels: list[float]) -> bool:
    """Whether two neighbouring levels sit too close for horizontal tick labels (under 12 % of the
    axis apart), as the MapReduce λ list does.

    >>> crowded([0.001, 0.01, 0.015, 0.0175, 0.01875, 0.02]), crowded([1 / 265, 1 / 180, 1 / 150])
    (True, False)
    """
    gaps = [b - a for a, b in pairwise(levels)]
    return len(levels) > 2 and min(gaps) < 0.12 * (levels[-1] - levels[0])


def legend_entries(axes: list[plt.Axes]) -> tuple[list, list[str]]:
    """Every labelled series of every panel, once each: a series may have no point in the first
    panel (the paper gives MRCP-RM's T and O, not its P)."""
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    return list(entries.values()), list(entries)


def merged_label(configs: list[str]) -> str:
    """One label for configurations sharing a published series: differing parts become ``*``.

    >>> merged_label(["pd/tsp1/subdeadline", "pd/tsp1/deadline"]), merged_label(["ed"])
    ('pd/tsp1/*', 'ed')
    """
    parts = [c.split("/") for c in configs]
    if len({len(p) for p in parts}) != 1:
        return ", ".join(configs)
    return "/".join(p[0] if len(set(p)) == 1 else "*" for p in zip(*parts, strict=True))
