"""Statistics over replications: mean, sd, n and Student-t CI half-widths; paired differences.

Each cell of a results table summarises the replications (seeds) of one configuration. The
half-width of the two-sided ``confidence`` interval is :func:`sim.stats.t_half_width` (the one CI
definition, shared with the precision sweeper); it is undefined (NaN) for n < 2.

Paired comparisons use common random numbers: runs that differ only in the column factor (the
policy) and share the seed saw the same jobs, so the per-seed difference removes the workload's
variance. ``n`` is then the number of pairs.

No difference is called significant from fewer than two pairs or from pairs that all differ by the
same amount (zero variance, as when every replication is an identical copy because the workload
does not depend on the seed): the t interval is then undefined or degenerate, not evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis import AnalysisError
from sim.stats import CONFIDENCE, t_half_width

COLUMN = "column"  # the combined column-factor label in aggregated frames
STAT_COLUMNS = ["mean", "sd", "n", "half_width", "ci_low", "ci_high"]
#: a spread below this fraction of the mean is floating-point noise of identical values
RELATIVE_NOISE = 1e-9


def no_spread(summary: pd.DataFrame) -> pd.Series:
    """Cells whose CI says nothing: n < 2, or zero variance (sd within floating-point noise of 0).

    >>> no_spread(pd.DataFrame({"mean": [3.0, 3.0, 0.0, 3.0], "sd": [1.0, 1e-15, 0.0, float("nan")],
    ...                         "n": [5, 5, 5, 1]})).tolist()
    [False, True, True, True]
    """
    scale = np.maximum(summary["mean"].abs().to_numpy(dtype=float), 1e-300)
    sd = summary["sd"].fillna(0.0).to_numpy(dtype=float)
    return pd.Series((summary["n"].to_numpy() < 2) | (sd <= RELATIVE_NOISE * scale), index=summary.index)


def column_labels(design: pd.DataFrame, cols: Sequence[str]) -> pd.Series:
    """One label per run from the column factors, joined with ``-`` (``PD-SL-TSP1`` style)."""
    parts = [design[c].map(level_text) for c in cols]
    label = parts[0]
    for part in parts[1:]:
        label = label + "-" + part
    return label.rename(COLUMN)


def level_text(value: object) -> str:
    """A factor level as text: integral floats without ``.0``, other numbers round-trip exact.

    >>> [level_text(v) for v in (4.0, 0.02125, "easy", float("nan"))]
    ['4', '0.02125', 'easy', '—']
    """
    if isinstance(value, float | np.floating):
        if np.isnan(value):
            return "—"
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    return str(value)


def aggregate(
    design: pd.DataFrame,
    rows: Sequence[str],
    cols: Sequence[str],
    metrics: Sequence[str],
    confidence: float = CONFIDENCE,
) -> pd.DataFrame:
    """Summary of every (row levels, column label, metric) cell over the runs in ``design``.

    Returns a long frame with the row factors, ``column``, ``metric`` and :data:`STAT_COLUMNS`.
    ``n`` counts the runs that logged the metric, so a missing metric gives n = 0 (mean NaN).
    """
    frame = design[list(rows)].assign(**{COLUMN: column_labels(design, cols)})
    frame = frame.join(design[list(metrics)])
    keys = [*rows, COLUMN]
    long = frame.melt(id_vars=keys, value_vars=list(metrics), var_name="metric", value_name="value")
    return _summarise(long, [*keys, "metric"], confidence)


def paired_differences(
    design: pd.DataFrame,
    rows: Sequence[str],
    cols: Sequence[str],
    metrics: Sequence[str],
    baseline: str,
    pair_on: Sequence[str] = (),
    seed_key: str = "seed",
    confidence: float = CONFIDENCE,
) -> pd.DataFrame:
    """Mean paired difference (column level − ``baseline``) per row cell, with its t CI.

    Runs are paired on ``rows`` + ``pair_on`` (other config keys that must match, i.e. every
    varying key except the column factors) + ``seed_key``. Returns a long frame with the row
    factors, ``column``, ``baseline``, ``metric``, :data:`STAT_COLUMNS` and ``excludes_zero``
    (never true where :func:`no_spread`: n < 2 or zero variance).
    """
    if seed_key not in design:
        raise AnalysisError(f"no {seed_key!r} param in the runs, so runs cannot be paired by seed")
    label = column_labels(design, cols)
    levels = sorted(label.unique())
    if baseline not in levels:
        raise AnalysisError(f"unknown baseline {baseline!r}; column levels: {', '.join(levels)}")
    keys = list(dict.fromkeys([*rows, *pair_on, seed_key]))
    by_level = {
        level: design[label == level].groupby(keys, dropna=False)[list(metrics)].mean() for level in levels
    }
    base = by_level[baseline]
    pieces = []
    for level in levels:
        if level == baseline:
            continue
        diff = (by_level[level] - base).reset_index()
        long = diff.melt(id_vars=keys, value_vars=list(metrics), var_name="metric", value_name="value")
        pieces.append(long[[*rows, "metric", "value"]].assign(**{COLUMN: level}))
    if not pieces:
        raise AnalysisError(f"only one column level ({baseline!r}): nothing to compare with")
    out = _summarise(pd.concat(pieces, ignore_index=True), [*rows, COLUMN, "metric"], confidence)
    out.insert(len(rows) + 1, "baseline", baseline)
    out["excludes_zero"] = ~no_spread(out) & (out["mean"].abs() > out["half_width"])
    return out


def _summarise(long: pd.DataFrame, keys: list[str], confidence: float) -> pd.DataFrame:
    grouped = long.groupby(keys, dropna=False, sort=True)["value"]
    out = grouped.agg(mean="mean", sd="std", n="count").reset_index()
    out["n"] = out["n"].astype(int)
    out["half_width"] = t_half_width(out["sd"].to_numpy(), out["n"].to_numpy(), confidence)
    out["ci_low"] = out["mean"] - out["half_width"]
    out["ci_high"] = out["mean"] + out["half_width"]
    return out
