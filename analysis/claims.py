"""Verdicts on a paper's claims, computed from the runs of its table.

Every claim is decided per cell (a row level and the configuration keys the claim leaves free),
from the paired differences of :func:`analysis.stats.paired_differences` (same seed = same
workload, so the difference is free of the workload's variance) or, for a bound, from the cell's
mean and CI (:func:`analysis.stats.aggregate`). Per cell, with the 95 % CI ``[lo, hi]`` of a − b:

- ``a < b``: supported if hi < 0, not supported if lo > 0, else inconclusive (``>`` mirrored);
- ``a <= b`` ("lower or similar"): not supported if lo > 0, else supported;
- ``a ~ b`` (similar): supported if the CI lies within ± tolerance·|mean of b|, not supported if
  it excludes 0 and lies outside that band, else inconclusive;
- ``below x``: supported if the cell's CI lies below x, not supported if above, else inconclusive.

A cell without spread (n < 2, or every pair differing by the same amount) is inconclusive — except
pairs that are all exactly equal, which support ``<=`` and ``~`` (and leave ``<``, ``>`` inconclusive). A
claim is supported when every cell is, not supported when any cell is not, else inconclusive.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.paper_spec import TRENDS, Claim, PaperTable, level_key
from analysis.stats import COLUMN, aggregate, no_spread, paired_differences

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
CLAIM_COLUMNS = ["table", "claim", "metric", "cell", "test", "mean", "half_width", "n", "verdict"]


def evaluate(table: PaperTable, design: pd.DataFrame, seed_key: str = "seed") -> pd.DataFrame:
    """One line per (claim, cell); ``design`` has the table's factor columns, ``seed_key`` and metrics."""
    lines = []
    for claim in table.claims:
        runs = _where(design, claim.where)
        if runs.empty or claim.metric not in runs or runs[claim.metric].notna().sum() == 0:
            lines.append(_line(table, claim, "(no runs)", _relation_text(claim), math.nan, math.nan, 0, INCONCLUSIVE))
            continue
        if claim.below is not None:
            lines += _bound(table, claim, runs)
        else:
            lines += _comparison(table, claim, runs, seed_key)
    return pd.DataFrame(lines, columns=CLAIM_COLUMNS)


def overall(lines: pd.DataFrame) -> pd.DataFrame:
    """One line per claim: its verdict over the cells and how many cells support it."""
    out = []
    for (table, claim, metric), group in lines.groupby(["table", "claim", "metric"], sort=False):
        verdicts = group["verdict"]
        verdict = (NOT_SUPPORTED if (verdicts == NOT_SUPPORTED).any()
                   else SUPPORTED if (verdicts == SUPPORTED).all() else INCONCLUSIVE)
        out.append({"table": table, "claim": claim, "metric": metric, "verdict": verdict,
                    "cells": f"{int((verdicts == SUPPORTED).sum())}/{len(verdicts)} supported"})
    return pd.DataFrame(out, columns=["table", "claim", "metric", "verdict", "cells"])


def _where(design: pd.DataFrame, where: dict) -> pd.DataFrame:
    keep = pd.Series(True, index=design.index)
    for key, wanted in where.items():
        values = wanted if isinstance(wanted, list) else [wanted]
        keep &= design[key].map(level_key).isin([level_key(v) for v in values])
    return design[keep]


def _bound(table: PaperTable, claim: Claim, runs: pd.DataFrame) -> list[list]:
    rows = [table.rows] if table.rows else []
    summary = aggregate(runs, rows, ["config"], [claim.metric])
    lines = []
    for _, cell in summary[summary["n"] > 0].iterrows():
        lo, hi = cell["ci_low"], cell["ci_high"]
        if cell["n"] < 2:
            verdict = INCONCLUSIVE
        else:
            if bool(no_spread(cell.to_frame().T).iloc[0]):  # identical replications: the mean is the value
                lo = hi = cell["mean"]
            verdict = SUPPORTED if hi < claim.below else NOT_SUPPORTED if lo > claim.below else INCONCLUSIVE
        name = "/".join([*(level_key(cell[r]) for r in rows), str(cell[COLUMN])])
        lines.append(_line(table, claim, name, f"mean < {claim.below:g}", cell["mean"], cell["half_width"],
                           int(cell["n"]), verdict))
    return lines


def _comparison(table: PaperTable, claim: Claim, runs: pd.DataFrame, seed_key: str) -> list[list]:
    a, b, relation = claim.a, claim.b, claim.relation
    factors = table.factors
    if claim.trend:
        levels = sorted(runs[table.rows].dropna().unique())
        a, b, relation = {table.rows: levels[-1]}, {table.rows: levels[0]}, TRENDS[claim.trend]
    side = pd.Series("", index=runs.index)
    side[_matches(runs, a)] = "a"
    side[_matches(runs, b)] = "b"
    pair = runs[side != ""].assign(_side=side[side != ""])
    cells = [k for k in factors if k not in set(a) | set(b)]
    if pair["_side"].nunique() < 2:
        return [_line(table, claim, "(no pairs)", _relation_text(claim), math.nan, math.nan, 0, INCONCLUSIVE)]
    diffs = paired_differences(pair, cells, ["_side"], [claim.metric], "b", (), seed_key)
    base = aggregate(pair[pair["_side"] == "b"], cells, ["_side"], [claim.metric]).set_index(cells or [COLUMN])
    lines = []
    for _, cell in diffs[diffs["n"] > 0].iterrows():
        key = tuple(cell[c] for c in cells) if len(cells) > 1 else (cell[cells[0]] if cells else "b")
        scale = abs(float(base.loc[key, "mean"])) if key in base.index else math.nan
        verdict = _verdict(relation, cell, claim.tolerance * scale)
        name = "/".join(level_key(cell[c]) for c in cells) or "all runs"
        lines.append(_line(table, claim, name, _relation_text(claim, a, b, relation), cell["mean"],
                           cell["half_width"], int(cell["n"]), verdict))
    return lines


def _matches(runs: pd.DataFrame, wanted: dict) -> pd.Series:
    keep = pd.Series(True, index=runs.index)
    for key, value in wanted.items():
        keep &= runs[key].map(level_key) == level_key(value)
    return keep


def _verdict(relation: str, cell: pd.Series, band: float) -> str:
    mean, lo, hi, n, sd = cell["mean"], cell["ci_low"], cell["ci_high"], cell["n"], cell["sd"]
    if n >= 2 and mean == 0 and (sd == 0 or math.isnan(sd)):  # identical in every pair
        return SUPPORTED if relation in ("<=", "~") else INCONCLUSIVE
    if bool(no_spread(cell.to_frame().T).iloc[0]):
        return INCONCLUSIVE
    if relation == "<":
        return SUPPORTED if hi < 0 else NOT_SUPPORTED if lo > 0 else INCONCLUSIVE
    if relation == ">":
        return SUPPORTED if lo > 0 else NOT_SUPPORTED if hi < 0 else INCONCLUSIVE
    if relation == "<=":
        return NOT_SUPPORTED if lo > 0 else SUPPORTED
    if max(abs(lo), abs(hi)) <= band:
        return SUPPORTED
    excludes_zero = lo > 0 or hi < 0
    return NOT_SUPPORTED if excludes_zero and min(abs(lo), abs(hi)) > band else INCONCLUSIVE


def _relation_text(claim: Claim, a: dict | None = None, b: dict | None = None, relation: str = "") -> str:
    if claim.below is not None:
        return f"mean < {claim.below:g}"
    a, b, relation = a or claim.a, b or claim.b, relation or claim.relation or TRENDS.get(claim.trend, "")
    side = lambda d: ", ".join(f"{k.rsplit('.', 1)[-1]}={level_key(v)}" for k, v in d.items())  # noqa: E731
    return f"({side(a)}) − ({side(b)}) {relation} 0" + (f" (±{claim.tolerance:.0%} of b)" if relation == "~" else "")


def _line(table: PaperTable, claim: Claim, cell: str, test: str, mean: float, half: float, n: int,
          verdict: str) -> list:
    return [table.id, claim.text, claim.metric, cell, test, mean, half, n, verdict]
