"""Replications until the confidence interval is tight enough (Law & Kelton's sequential procedure).

Pure statistics, no Hydra: the precision sweeper (``hydra/sweeper=precision``) feeds each cell's per-seed
results to :func:`judge` and runs the seeds it asks for; the half-width is :func:`sim.stats.t_half_width`
(the project's one CI definition, which analysis's tables use too).

A cell is one configuration; its replications are the seeds 0, 1, 2 … (common random numbers). It
runs ``initial`` seeds, then ``batch`` more per round while some metric's half-width is above its
target, and stops on its own:

- ``met``: every metric has ``half_width ≤ max(relative · |mean|, absolute)`` (either bound
  suffices, so an absolute floor serves a mean near 0) from at least ``initial`` results;
- ``capped``: ``max_replications`` seeds tried without meeting the target (never reported as met);
- ``failing``: ``max_failures`` runs failed (each failed seed is counted and not retried);
- ``deterministic``: the workload ignores the seed, so one result is the answer (no CI).

With ``extrapolate`` a round adds, at once, the seeds the current standard deviation says are
still needed (``n · (half-width / bound)²``, at least ``batch``): fewer rounds, each possibly
overshooting a little; the stopping test is the same.

Paired mode judges a cell on the per-seed difference against its ``baseline`` cell over the seeds
both finished (the relative bound is then relative to the mean difference); a baseline cell runs
the seeds its comparators need and is never judged on its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from sim.stats import CONFIDENCE, t_half_width


class RuleError(ValueError):
    """A stopping rule that cannot work as written, or a file that is not a precision sweep's table."""


MET, RUNNING, CAPPED, FAILING, DETERMINISTIC, BASELINE = (
    "met", "running", "capped", "failing", "deterministic", "baseline")


@dataclass(frozen=True)
class Target:
    """The half-width wanted for one metric: ``relative`` (fraction of |mean|) and/or ``absolute``."""

    metric: str
    relative: float | None = None
    absolute: float | None = None

    def __post_init__(self) -> None:
        if self.relative is None and self.absolute is None:
            raise RuleError(f"metric {self.metric!r}: give relative_halfwidth and/or absolute_halfwidth")
        for name, value in (("relative_halfwidth", self.relative), ("absolute_halfwidth", self.absolute)):
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise RuleError(f"{name} for {self.metric!r} must be a positive number, got {value!r}")

    def bound(self, mean: float) -> float:
        """The largest half-width that meets this target at ``mean``.

        >>> Target("wait/mean", relative=0.05, absolute=1.0).bound(100.0)
        5.0
        """
        return max(self.relative * abs(mean) if self.relative else 0.0, self.absolute or 0.0)


@dataclass(frozen=True)
class Rule:
    """The sequential procedure's settings (see the module docstring)."""

    targets: tuple[Target, ...]
    confidence: float = CONFIDENCE
    initial: int = 5
    batch: int = 5
    max_replications: int = 100
    max_failures: int = 3
    #: add at once the seeds the current variance says a cell still needs (at least ``batch``)
    extrapolate: bool = False

    def __post_init__(self) -> None:
        if not self.targets:
            raise RuleError("precision: name at least one metric")
        if not 0 < self.confidence < 1:
            raise RuleError(f"confidence must lie in (0, 1), got {self.confidence!r}")
        for name in ("initial", "batch", "max_replications", "max_failures"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RuleError(f"{name} must be a positive integer, got {value!r}")
        if self.initial < 2:
            raise RuleError(f"initial must be ≥ 2 (a CI needs two replications), got {self.initial}")
        if self.max_replications < self.initial:
            raise RuleError(f"max_replications ({self.max_replications}) must be ≥ initial ({self.initial})")


@dataclass
class Cell:
    """What one cell's runs gave so far: metrics per finished seed, the seeds that failed and those another
    sweep was running (left to it)."""

    results: dict[int, dict[str, float]] = field(default_factory=dict)
    failed: set[int] = field(default_factory=set)
    deterministic: bool = False
    elsewhere: set[int] = field(default_factory=set)

    @property
    def tried(self) -> int:
        """Seeds launched so far (the next seed is this number: seeds are 0, 1, 2 …)."""
        return len(self.results) + len(self.failed) + len(self.elsewhere)


@dataclass(frozen=True)
class Precision:
    """One metric of one cell: mean and half-width over ``n`` results (differences in paired mode)."""

    metric: str
    n: int
    mean: float
    half_width: float
    bound: float

    @property
    def met(self) -> bool:
        return self.n >= 2 and self.half_width <= self.bound


@dataclass(frozen=True)
class Verdict:
    """Where a cell stands after a round, and how many more seeds it needs (``more``)."""

    status: str
    tried: int
    failed: int
    metrics: tuple[Precision, ...]
    more: int = 0
    baseline: str | None = None


def precision(values: Sequence[float], target: Target, confidence: float = CONFIDENCE) -> Precision:
    """Mean and Student-t half-width of ``values`` against ``target`` (NaN half-width for n < 2).

    >>> p = precision([9.0, 10.0, 11.0, 10.0], Target("x", relative=0.1))
    >>> round(p.half_width, 3), p.met
    (1.299, False)
    """
    data = np.asarray(values, dtype=float)
    n = int(data.size)
    mean = float(data.mean()) if n else math.nan
    sd = float(data.std(ddof=1)) if n >= 2 else math.nan
    return Precision(target.metric, n, mean, float(t_half_width(sd, n, confidence)), target.bound(mean))


def judge(cell: Cell, rule: Rule) -> Verdict:
    """One cell on its own: met, capped, failing, deterministic or running (with ``more`` seeds to add).

    >>> rule = Rule((Target("w", relative=0.05),), initial=3, batch=2, max_replications=6)
    >>> judge(Cell({0: {"w": 10.0}, 1: {"w": 10.1}, 2: {"w": 9.9}}), rule).status
    'met'
    >>> v = judge(Cell({0: {"w": 1.0}, 1: {"w": 9.0}, 2: {"w": 5.0}}), rule); v.status, v.more
    ('running', 2)
    """
    metrics = tuple(precision([r[t.metric] for r in cell.results.values()], t, rule.confidence)
                    for t in rule.targets)
    return _verdict(cell, metrics, rule, all(p.met for p in metrics))


def judge_paired(cells: Mapping[Hashable, Cell], baseline_of: Mapping[Hashable, Hashable | None],
                 rule: Rule) -> dict[Hashable, Verdict]:
    """Every cell, a comparator judged on its difference to ``baseline_of[cell]`` over shared seeds.

    Cells mapped to ``None`` are judged alone; a baseline cell runs as many seeds as its furthest
    comparator needs and reports its own mean and half-width with status ``baseline``.
    """
    verdicts: dict[Hashable, Verdict] = {}
    wanted: dict[Hashable, int] = {}
    for key, cell in cells.items():
        base_key = baseline_of.get(key)
        if key in set(baseline_of.values()) and base_key is None:
            continue
        if base_key is None:
            verdicts[key] = judge(cell, rule)
            continue
        base = cells[base_key]
        shared = sorted(set(cell.results) & set(base.results))
        metrics = tuple(precision([cell.results[s][t.metric] - base.results[s][t.metric] for s in shared],
                                  t, rule.confidence) for t in rule.targets)
        if base.failed and len(base.failed) >= rule.max_failures:
            verdict = Verdict(FAILING, cell.tried, len(cell.failed), metrics, baseline=str(base_key))
        else:
            verdict = _verdict(cell, metrics, rule, all(p.met for p in metrics))
            verdict = Verdict(verdict.status, verdict.tried, verdict.failed, metrics, verdict.more, str(base_key))
        verdicts[key] = verdict
        wanted[base_key] = max(wanted.get(base_key, 0), cell.tried + verdict.more)
    for key, cell in cells.items():
        if key in verdicts:
            continue
        alone = judge(cell, rule)
        need = max(0, wanted.get(key, 0) - cell.tried)
        status = FAILING if len(cell.failed) >= rule.max_failures else BASELINE
        verdicts[key] = Verdict(status, cell.tried, len(cell.failed), alone.metrics, need if status != FAILING else 0)
    return verdicts


def _verdict(cell: Cell, metrics: tuple[Precision, ...], rule: Rule, met: bool) -> Verdict:
    tried, failed, n = cell.tried, len(cell.failed), len(cell.results)
    if failed >= (1 if cell.deterministic else rule.max_failures):
        return Verdict(FAILING, tried, failed, metrics)
    if cell.deterministic:
        return Verdict(DETERMINISTIC, tried, failed, metrics) if n else Verdict(RUNNING, tried, failed, metrics, 1)
    if n >= rule.initial and met:
        return Verdict(MET, tried, failed, metrics)
    if tried >= rule.max_replications:
        return Verdict(CAPPED, tried, failed, metrics)
    more = rule.initial - n if n < rule.initial else rule.batch
    if rule.extrapolate and n >= rule.initial:
        more = max(more, max(_needed(p, rule.confidence) for p in metrics) - n)
    return Verdict(RUNNING, tried, failed, metrics, min(more, rule.max_replications - tried))


def _needed(p: Precision, confidence: float) -> int:
    """Law & Kelton's n*: the fewest results whose half-width, with today's standard deviation, meets
    the bound (``t_{(1+confidence)/2, i-1} · s / √i ≤ bound``); 0 when that is unknown.

    >>> _needed(Precision("w", n=10, mean=100.0, half_width=10.0, bound=5.0), 0.95)
    33
    """
    if not (p.bound > 0 and math.isfinite(p.half_width) and p.n >= 2):
        return 0
    sd = p.half_width / float(t_half_width(1.0, p.n, confidence))

    def meets(i: int) -> bool:
        return float(t_half_width(sd, i, confidence)) <= p.bound

    low, high = p.n, max(p.n, math.ceil(p.n * (p.half_width / p.bound) ** 2))  # high meets: t falls with i
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if meets(mid) else (mid + 1, high)
    return low


def table(verdicts: Mapping[str, Verdict], confidence: float = CONFIDENCE) -> str:
    """The end-of-sweep table: per cell and metric n, mean, half-width, target and status."""
    header = ("cell", "metric", "n", "failed", "mean", f"± ({confidence:.0%})", "±/|mean|", "target ±", "status")
    rows = [header]
    for cell, verdict in verdicts.items():
        label = cell if verdict.baseline is None else f"{cell} − [{verdict.baseline}]"
        for p in verdict.metrics:
            rel = p.half_width / abs(p.mean) if p.mean else math.nan
            status = verdict.status.upper() if verdict.status in (CAPPED, FAILING) else verdict.status
            rows.append((label, p.metric, str(p.n), str(verdict.failed), f"{p.mean:.6g}", f"{p.half_width:.4g}",
                         f"{rel:.2%}", f"{p.bound:.4g}", status))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    flagged = [c for c, v in verdicts.items() if v.status in (CAPPED, FAILING)]
    if flagged:
        lines.append(f"NOT within target: {len(flagged)} cell(s) capped or failing: " + "; ".join(flagged))
    return "\n".join(lines)


def save(path: Path, verdicts: Mapping[str, Verdict], rule: Rule) -> None:
    """Write the verdicts as JSON (read back with :func:`load`)."""
    body = {"rule": asdict(rule), "cells": {k: asdict(v) for k, v in verdicts.items()}}
    path.write_text(json.dumps(body, indent=1, default=float))


def load(path: Path) -> tuple[dict[str, Verdict], Rule]:
    """The verdicts and rule :func:`save` wrote; a clear error for a missing or foreign file."""
    try:
        body = json.loads(Path(path).read_text())
        rule = Rule(tuple(Target(**t) for t in body["rule"].pop("targets")), **body["rule"])
        verdicts = {k: Verdict(**{**v, "metrics": tuple(Precision(**p) for p in v["metrics"])})
                    for k, v in body["cells"].items()}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise RuleError(f"{path}: not a precision sweep result ({type(error).__name__}: {error})") from None
    return verdicts, rule


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m sim.precision MULTIRUN_DIR/precision.json")
    try:
        found, used = load(Path(sys.argv[1]))
    except RuleError as exc:
        sys.exit(f"Error: {exc}")
    print(table(found, used.confidence))
