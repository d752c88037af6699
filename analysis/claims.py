"""Verdicts on a paper's claims, computed from the runs of its table.

Every claim is decided per cell (a row level and the configuration keys the claim leaves free),
from the paired differences of :func:`analysis.stats.paired_differences` (same seed = same
workload, so the difference is free of the workload's variance) or, for a bound, from the cell's
mean and CI (:func:`analysis.stats.aggregate`).

A comparison (or trend) allows a set of values of a − b — its relation, narrowed by the claim's
``at_most`` / ``at_least`` (fractions of s = |mean of b| over the cell's b runs, taken as exact):

- ``a < b``: a − b < 0; with ``at_most`` x ("slightly lower") also ≥ −x·s, with ``at_least`` y
  ("much lower") also ≤ −y·s (``>`` mirrored: "slightly higher" is 0 < a − b ≤ x·s);
- ``a <= b`` ("lower or similar"): a − b ≤ 0; with ``at_most`` x also ≥ −x·s ("at most slightly lower");
- ``a ~ b`` (similar, comparable): |a − b| ≤ max(x·s, ``margin``), x = ``at_most`` or 10 %.

With ``log`` the same rules apply to d = log a − log b per pair (the log ratio), with s = 1 and the
bounds log(1 + x), log(1 + y): "much higher" is a/b ≥ 1.5 in every seed's pairing, whatever b's scale,
so a ratio that holds seed by seed is not lost in the spread of a − b. A pair with a value ≤ 0 has no
log ratio and is left out.

Per cell, with the 95 % CI ``[lo, hi]`` of a − b: *not supported* if the CI misses every allowed
value (e.g. ``<``: lo > 0; "slightly higher": hi < 0 or lo > x·s; "much higher": hi < y·s); else
*supported* if the CI lies inside the allowed values (``<``: hi < 0; "slightly higher": lo > 0 and
hi ≤ x·s; "much higher": lo ≥ y·s; ``~``: −x·s ≤ lo and hi ≤ x·s) — and always for ``<=``, which
only asks that nothing contradict it; else *inconclusive*. With b's mean 0 every difference is
infinitely large relative to it: "much" needs only the direction, "slightly" is never supported.
A bound ``below x``: supported if the cell's CI lies below x, not supported if above, else inconclusive.

A cell without spread (n < 2, or every pair differing by the same amount) is inconclusive — except
pairs that are all exactly equal, which support ``<=`` and ``~`` (and leave ``<``, ``>`` inconclusive);
so is a bounded claim whose cell has no b mean to scale by. A claim is supported when every cell is,
not supported when any cell is not, else inconclusive.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.formatting import format_pm
from analysis.paper_spec import Claim, PaperTable, level_key
from analysis.stats import COLUMN, aggregate, no_spread, paired_differences

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
CLAIM_COLUMNS = ["table", "claim", "metric", "cell", "test", "mean", "half_width", "n", "verdict"]


def evaluate(table: PaperTable, design: pd.DataFrame, seed_key: str = "seed") -> pd.DataFrame:
    """One line per (claim, cell); ``design`` has the table's factor columns, ``seed_key`` and metrics."""
    lines = []
    for claim in table.claims:
        runs = design if design.empty else _where(design, claim.where)  # not run yet: no factor columns
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


def claims_markdown(lines: pd.DataFrame, quotes: dict[tuple[str, str], str] | None = None) -> str:
    """The claims: one verdict line per claim and table, the papers' words behind them (``quotes``:
    (table, claim text) → the seed's sentence), then every cell with its difference ± CI."""
    if lines.empty:
        return "# Claims\n\nNo table declares claims."
    head = ["# Claims of the papers, checked on our runs", "",
            "Verdicts from paired differences (same seed, same workload) with 95% t CIs, in the metric's own "
            "units (P as a fraction, seconds); rules in analysis/claims.py.",
            "", "| table | claim | verdict | cells |", "|---|---|---|---|"]
    head += [f"| {r.table} | {r.claim} | **{r.verdict}** | {r.cells} |" for r in overall(lines).itertuples()]
    said: dict[str, dict[str, list[str]]] = {}
    for (table, claim), quote in (quotes or {}).items():
        said.setdefault(quote, {}).setdefault(claim, []).append(table)
    if said:
        head += ["", "## What the papers say", "",
                 "The sentence each claim comes from; its test (the test column below) follows the words, as "
                 "docs/paper/README.md (Claims) describes.", ""]
        for quote, claims in said.items():
            head += [f"> {quote}", "", *(f"- {claim} ({', '.join(tables)})" for claim, tables in claims.items()), ""]
        head.pop()
    head += ["", "## Every cell", "", "| table | claim | cell | test | a − b (or mean) ± CI | n | verdict |",
             "|---|---|---|---|---:|---:|---|"]
    for r in lines.itertuples():
        value = format_pm(r.mean, r.half_width, int(r.n)) if r.n else "—"
        head.append(f"| {r.table} | {r.claim} | {r.cell} | {r.test} | {value} | {r.n} | {r.verdict} |")
    return "\n".join(head)


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
    a, b, relation = claim.a, claim.b, claim.test
    at_most, at_least = claim.bounds()
    factors = table.factors
    if claim.trend:
        levels = sorted(runs[table.rows].dropna().unique())
        a, b = {table.rows: levels[-1]}, {table.rows: levels[0]}
    side = pd.Series("", index=runs.index)
    side[_matches(runs, a)] = "a"
    side[_matches(runs, b)] = "b"
    pair = runs[side != ""].assign(_side=side[side != ""])
    if claim.log:  # the paired log ratio; its bounds are log(1 + x), not fractions of b
        pair[claim.metric] = np.log(pair[claim.metric].where(pair[claim.metric] > 0))
        at_most, at_least = (None if x is None else math.log1p(x) for x in (at_most, at_least))
    cells = [k for k in factors if k not in set(a) | set(b)]
    if pair["_side"].nunique() < 2:
        return [_line(table, claim, "(no pairs)", _relation_text(claim), math.nan, math.nan, 0, INCONCLUSIVE)]
    diffs = paired_differences(pair, cells, ["_side"], [claim.metric], "b", (), seed_key)
    base = aggregate(pair[pair["_side"] == "b"], cells, ["_side"], [claim.metric]).set_index(cells or [COLUMN])
    lines = []
    for _, cell in diffs[diffs["n"] > 0].iterrows():
        key = tuple(cell[c] for c in cells) if len(cells) > 1 else (cell[cells[0]] if cells else "b")
        scale = 1.0 if claim.log else abs(float(base.loc[key, "mean"])) if key in base.index else math.nan
        verdict = _verdict(relation, cell, scale, at_most, at_least, claim.margin)
        name = "/".join(level_key(cell[c]) for c in cells) or "all runs"
        lines.append(_line(table, claim, name, _relation_text(claim, a, b), cell["mean"],
                           cell["half_width"], int(cell["n"]), verdict))
    return lines or [_line(table, claim, "(no pairs)", _relation_text(claim), math.nan, math.nan, 0, INCONCLUSIVE)]


def _matches(runs: pd.DataFrame, wanted: dict) -> pd.Series:
    keep = pd.Series(True, index=runs.index)
    for key, value in wanted.items():
        keep &= runs[key].map(level_key) == level_key(value)
    return keep


def _verdict(relation: str, cell: pd.Series, scale: float, at_most: float | None, at_least: float | None,
             margin: float | None = None) -> str:
    """One cell's verdict (module docstring) from its paired difference (``mean``, ``sd``, ``n``,
    ``ci_low``, ``ci_high``), ``scale`` = |mean of b|, the claim's relative bounds and its margin."""
    mean, lo, hi, n, sd = cell["mean"], cell["ci_low"], cell["ci_high"], cell["n"], cell["sd"]
    if n >= 2 and mean == 0 and (sd == 0 or math.isnan(sd)):  # identical in every pair
        return SUPPORTED if relation in ("<=", "~") else INCONCLUSIVE
    if bool(no_spread(cell.to_frame().T).iloc[0]):
        return INCONCLUSIVE
    if (at_most is not None or at_least is not None) and not math.isfinite(scale) and margin is None:
        return INCONCLUSIVE
    low, high = _allowed(relation, scale, at_most, at_least, margin)
    if hi < low or lo > high:
        return NOT_SUPPORTED
    direction = {"<": hi < 0, ">": lo > 0}.get(relation, True)
    return SUPPORTED if relation == "<=" or (low <= lo and hi <= high and direction) else INCONCLUSIVE


def _allowed(relation: str, scale: float, at_most: float | None, at_least: float | None,
             margin: float | None = None) -> tuple[float, float]:
    """The closed range ``[low, high]`` of a − b the claim allows (``<`` and ``>`` also exclude 0 itself).

    >>> _allowed(">", 200.0, 0.25, None), _allowed("<", 2.0, None, 0.5), _allowed("~", 10.0, 0.1, None)
    ((0.0, 50.0), (-inf, -1.0), (-1.0, 1.0))
    >>> _allowed("~", 0.009, 0.1, None, 0.002), _allowed("~", math.nan, 0.1, None, 0.002)
    ((-0.002, 0.002), (-0.002, 0.002))
    """
    most = math.inf if at_most is None else at_most * scale
    if margin is not None:
        most = margin if math.isnan(most) else max(most, margin)
    least = 0.0 if at_least is None else at_least * scale
    if relation == ">":
        return least, most
    return (-most, most) if relation == "~" else (-most, -least)


def _relation_text(claim: Claim, a: dict | None = None, b: dict | None = None) -> str:
    if claim.below is not None:
        return f"mean < {claim.below:g}"
    a, b, relation = a or claim.a, b or claim.b, claim.test
    at_most, at_least = claim.bounds()
    side = lambda d: ", ".join(f"{k.rsplit('.', 1)[-1]}={level_key(v)}" for k, v in d.items())  # noqa: E731
    if claim.log:
        text = f"log(({side(a)}) / ({side(b)})) {relation} 0"
        if relation == "~":
            return text + f" (±log {1 + (at_most or 0.0):g})"
        sizes = [f"{sign} log {1 + x:g}" for sign, x in (("≥", at_least), ("≤", at_most)) if x is not None]
        return text + (f", by {' and '.join(sizes)}" if sizes else "")
    text = f"({side(a)}) − ({side(b)}) {relation} 0"
    if relation == "~":
        floor = f", at least ±{claim.margin:g}" if claim.margin is not None else ""
        return text + f" (±{_percent(at_most)} of b{floor})"
    sizes = [f"{sign} {_percent(x)}" for sign, x in (("≥", at_least), ("≤", at_most)) if x is not None]
    return text + (f", by {' and '.join(sizes)} of b" if sizes else "")


def _percent(fraction: float | None) -> str:
    return f"{(fraction or 0.0) * 100:g}%"


def _line(table: PaperTable, claim: Claim, cell: str, test: str, mean: float, half: float, n: int,
          verdict: str) -> list:
    return [table.id, claim.text, claim.metric, cell, test, mean, half, n, verdict]
