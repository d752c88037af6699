"""What a paper table is: its ``paper:`` block (in ``conf/experiment/paper_<id>.yaml``) and its
published values (``docs/paper/published/<id>.csv``), read and checked with one-line errors.

The ``paper:`` block (``paper`` is in ``sweep.non_semantic``: never part of a run's identity)::

    paper:
      table: ligo_lambda                  # published values in <published>/<table>.csv
      title: "LIGO: arrival rate"
      rows: workload.arrival_rate         # the varied factor (a config key; null: one row)
      configs: [policy.laxity_distribution, policy.tsp]   # column label: their values joined with "/"
      metrics: [late/proportion, turnaround/mean, overhead/mean_s]
      layout: long                        # optional: a line per configuration (many factors); default wide
      reading: [policy.multi_parent, workload.n]   # optional: the caption names these keys' values (the
                                          # seed's open readings and the workload scale the table ran)
      claims:                             # optional: directions the paper reports (analysis/claims.py)
        - {trend: increasing, metric: late/proportion, text: "P rises with λ", quote: "An increase in …"}
        - {below: 0.05, metric: overhead/mean_s, text: "O below 0.05 s"}
        - {a: {policy.tsp: tsp1}, b: {policy.tsp: tsp2}, relation: "<=", metric: late/proportion,
           where: {policy.laxity_distribution: pd}, text: "TSP1 lower or similar P than TSP2"}
        - {a: {policy.tsp: tsp2}, b: {policy.tsp: tsp1}, relation: ">", at_most: 0.25,
           metric: turnaround/mean, text: "TSP2 slightly higher T than TSP1"}

A comparison or trend may bound the size of a − b relative to b's mean: ``at_most`` ("slightly": 0.25;
for ``~`` it replaces the default ±10 %) and, with ``<`` or ``>``, ``at_least`` ("much": 0.5); ``quote``
is the seed's sentence the claim comes from, shown in ``claims.md``. ``log: true`` tests the paired log
ratio log(a/b) instead (a ratio claim: "much higher", "x times"; the bounds become log(1 + x)); a ``~``
claim's ``margin`` (metric units) is the least half-width of "similar" (the paper's printed resolution,
the measured run-to-run noise), so ±max(x·|b|, margin).

The CSV has the columns ``row,config,metric,mean,halfwidth,source`` in our units (fractions, seconds).
"""

from __future__ import annotations

import csv
import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import OmegaConf

from analysis import AnalysisError

PUBLISHED_COLUMNS = ["row", "config", "metric", "mean", "halfwidth", "source"]
RELATIONS = ("<", ">", "<=", "~")
TRENDS = {"increasing": ">", "decreasing": "<"}
SIMILAR = 0.1  # "~" without at_most: similar means within ±10 % of b's mean
LAYOUTS = ("wide", "long")  # paper.layout: the paper's shape, or a line per configuration (many factors)


@dataclass(frozen=True)
class Claim:
    """One direction the paper reports, tested on the runs (see :mod:`analysis.claims`).

    A comparison claim pairs runs matching ``a`` with runs matching ``b`` (same seed, same other
    factors) and tests ``a − b`` against ``relation``; a trend claim is the comparison of the row
    factor's highest level with its lowest; a bound claim tests each cell's mean against ``below``.
    ``at_most`` / ``at_least`` bound ``|a − b|`` as a fraction of ``|mean of b|`` (see :meth:`bounds`).
    """

    text: str
    metric: str
    relation: str = ""
    a: dict[str, Any] = field(default_factory=dict)
    b: dict[str, Any] = field(default_factory=dict)
    trend: str = ""
    below: float | None = None
    where: dict[str, Any] = field(default_factory=dict)
    at_most: float | None = None
    at_least: float | None = None
    quote: str = ""
    #: test the paired log ratio log(a/b) instead of a − b ("much higher", "x times": a ratio claim)
    log: bool = False
    #: a similarity margin floor in the metric's units (the paper's printed resolution, measured noise)
    margin: float | None = None

    @property
    def test(self) -> str:
        """The relation tested: ``relation``, or the trend's (``>`` increasing, ``<`` decreasing); "" for a bound."""
        return TRENDS.get(self.trend, self.relation)

    def bounds(self) -> tuple[float | None, float | None]:
        """``(at_most, at_least)``, with ``~``'s default ±:data:`SIMILAR` when it gives no ``at_most``.

        >>> Claim("t", "m", "~", {"k": 1}, {"k": 2}).bounds(), Claim("t", "m", ">", at_least=0.5).bounds()
        ((0.1, None), (None, 0.5))
        """
        if self.test == "~" and self.at_most is None:
            return SIMILAR, None
        return self.at_most, self.at_least


@dataclass(frozen=True)
class PaperTable:
    """One table of a paper: where its runs are, its shape, its claims and its published values."""

    id: str
    title: str
    experiment: str
    rows: str | None
    configs: list[str]
    metrics: list[str]
    claims: list[Claim]
    source: Path
    published: pd.DataFrame
    #: ``wide``: the paper's shape (a column per metric and configuration); ``long``: a line per configuration
    layout: str = "wide"
    #: config keys whose values the caption names (the open readings and the scale), unless a factor shows them
    reading: list[str] = field(default_factory=list)

    @property
    def factors(self) -> list[str]:
        """The config keys that tell the table's cells apart: the row factor (if any), then ``configs``."""
        return [*([self.rows] if self.rows else []), *self.configs]

    def config_label(self, values: dict[str, Any]) -> str:
        """The column label of a config (its ``configs`` values joined with ``/``)."""
        return "/".join(str(values[k]) for k in self.configs)


def load_tables(conf_dir: Path, published_dir: Path, only: list[str] | None = None) -> list[PaperTable]:
    """Every ``paper_*.yaml`` under ``conf_dir`` (sorted; ``only``: file stems matching a glob)."""
    files = sorted(conf_dir.glob("paper_*.yaml"))
    if not files:
        raise AnalysisError(f"no paper_*.yaml in {conf_dir}")
    if only:
        chosen = [f for f in files if any(fnmatch.fnmatch(f.stem, pattern) for pattern in only)]
        if not chosen:
            raise AnalysisError(f"no experiment matches {only}; have: {', '.join(f.stem for f in files)}")
        files = chosen
    return [read_table(f, published_dir) for f in files]


def read_table(path: Path, published_dir: Path) -> PaperTable:
    """One experiment file's ``paper:`` block and ``experiment_name``."""
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    block = raw.get("paper") if isinstance(raw, dict) else None
    if not isinstance(block, dict):
        raise AnalysisError(f"{path}: no paper: block (expected table, title, rows, configs, metrics)")
    where = f"{path}: paper."
    for key in ("table", "title", "configs", "metrics"):
        if not block.get(key):
            raise AnalysisError(f"{where}{key} is missing")
    if "rows" not in block:
        raise AnalysisError(f"{where}rows is missing (a config key, or null for one row)")
    for key in ("configs", "metrics", "reading"):  # reading is optional: none
        value = block.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise AnalysisError(f"{where}{key} must be a list of names, got {value!r}")
    experiment = raw.get("experiment_name")
    if not isinstance(experiment, str) or not experiment:
        raise AnalysisError(f"{path}: experiment_name is missing (the MLflow experiment of the table's runs)")
    claims = [_claim(c, f"{where}claims[{i}]", block["metrics"]) for i, c in enumerate(block.get("claims") or [])]
    table = str(block["table"])
    layout = block.get("layout", "wide")
    if layout not in LAYOUTS:
        raise AnalysisError(f"{where}layout: expected one of {', '.join(LAYOUTS)}, got {layout!r}")
    published = read_published(published_dir / f"{table}.csv", block["metrics"])
    paper = PaperTable(table, str(block["title"]), experiment, block["rows"], list(block["configs"]),
                       list(block["metrics"]), claims, path, published, layout, block.get("reading") or [])
    for i, claim in enumerate(claims):
        unknown = sorted({*claim.a, *claim.b, *claim.where} - set(paper.factors))
        if unknown:  # it would match no run, and the claim would read "inconclusive" for a typo
            raise AnalysisError(f"{where}claims[{i}]: {', '.join(unknown)} not a factor of the table "
                                f"({', '.join(paper.factors)})")
    return paper


def _claim(raw: Any, where: str, metrics: list[str]) -> Claim:
    if not isinstance(raw, dict):
        raise AnalysisError(f"{where}: expected a mapping, got {raw!r}")
    known = set(Claim.__dataclass_fields__)
    extra = sorted(set(raw) - known)
    if extra:
        raise AnalysisError(f"{where}: unknown field(s) {extra}; expected {sorted(known)}")
    if not raw.get("text") or raw.get("metric") not in metrics:
        raise AnalysisError(f"{where}: needs text and a metric of the table ({', '.join(metrics)}), got {raw!r}")
    for name in ("text", "quote"):
        if not isinstance(raw.get(name, ""), str):
            raise AnalysisError(f"{where}.{name}: expected text, got {raw[name]!r}")
    for name in ("below", "at_most", "at_least", "margin"):
        value = raw.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not math.isfinite(value) or (name != "below" and value <= 0)):
            raise AnalysisError(f"{where}.{name}: expected a {'' if name == 'below' else 'positive '}number, "
                                f"got {value!r}")
    claim = Claim(**raw)
    kinds = [bool(claim.trend), claim.below is not None, bool(claim.a or claim.b)]
    if sum(kinds) != 1:
        raise AnalysisError(f"{where}: give exactly one of trend, below, or a + b + relation")
    if claim.trend and claim.trend not in TRENDS:
        raise AnalysisError(f"{where}.trend: expected {' or '.join(TRENDS)}, got {claim.trend!r}")
    if claim.relation and not (claim.a or claim.b):
        raise AnalysisError(f"{where}.relation: only a comparison (a + b) has one, got {claim.relation!r}")
    if claim.a or claim.b:
        if not (claim.a and claim.b and isinstance(claim.a, dict) and isinstance(claim.b, dict)):
            raise AnalysisError(f"{where}: a and b must both be mappings of config key → value")
        if claim.relation not in RELATIONS:
            raise AnalysisError(f"{where}.relation: expected one of {', '.join(RELATIONS)}, got {claim.relation!r}")
    if not isinstance(claim.where, dict):
        raise AnalysisError(f"{where}.where: expected a mapping of config key → value (or list), got {claim.where!r}")
    if claim.below is not None and (claim.at_most or claim.at_least):
        raise AnalysisError(f"{where}: at_most and at_least bound a difference; a below claim has none")
    if claim.at_least and claim.test not in ("<", ">"):
        raise AnalysisError(f"{where}.at_least: a minimum difference needs relation < or > (or a trend), "
                            f"not {claim.test!r}")
    if not isinstance(claim.log, bool) or (claim.log and not (claim.trend or claim.a)):
        raise AnalysisError(f"{where}.log: true or false, and only for a comparison or trend, got {claim.log!r}")
    if claim.margin is not None and (claim.test != "~" or claim.log):
        raise AnalysisError(f"{where}.margin: a similarity floor, only for relation ~ without log")
    if claim.at_least and claim.at_most and claim.at_least >= claim.at_most:
        raise AnalysisError(f"{where}: at_least {claim.at_least:g} is not below at_most {claim.at_most:g}")
    return claim


def read_published(path: Path, metrics: list[str]) -> pd.DataFrame:
    """The published values of one table (an empty frame when the paper gives none)."""
    if not path.exists():
        raise AnalysisError(f"{path}: missing (the table's published values; a header line alone if there are none)")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != PUBLISHED_COLUMNS:
            raise AnalysisError(f"{path}:1: columns {reader.fieldnames}, expected {','.join(PUBLISHED_COLUMNS)}")
        rows = []
        for line, rec in enumerate(reader, start=2):
            if rec["metric"] not in metrics:
                raise AnalysisError(f"{path}:{line}: metric {rec['metric']!r} is not one of the table's "
                                    f"({', '.join(metrics)})")
            mean, half = _number(rec["mean"], path, line, "mean"), _number(rec["halfwidth"], path, line, "halfwidth")
            if math.isnan(mean):
                raise AnalysisError(f"{path}:{line}: mean is empty (leave the row out instead)")
            rows.append({"row": rec["row"], "config": rec["config"], "metric": rec["metric"], "mean": mean,
                         "halfwidth": half, "source": rec["source"], "line": line})
    frame = pd.DataFrame(rows, columns=[*PUBLISHED_COLUMNS, "line"])
    dup = frame.duplicated(["row", "config", "metric"], keep=False)
    if dup.any():
        first = frame[dup].iloc[0]
        raise AnalysisError(f"{path}:{first['line']}: row {first['row']}, config {first['config']}, metric "
                            f"{first['metric']} given twice")
    return frame


def _number(text: str | None, path: Path, line: int, name: str) -> float:
    if text is None or text.strip() == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise AnalysisError(f"{path}:{line}: {name} {text!r} is not a number") from None


def level_key(value: Any) -> str:
    """A factor level as a comparison key: numbers to 12 significant digits (``"2"`` = ``2.0``); a null
    config value as MLflow logs it (``"None"``), so ``remap_cap: null`` in a claim meets its runs;
    a missing value (NaN) as ``—``.

    >>> level_key("0.005555555555555556") == level_key(1 / 180), level_key("2") == level_key(2.0)
    (True, True)
    >>> level_key(None) == level_key("None"), level_key(float("nan"))
    (True, '—')
    """
    if value is None:
        return "None"
    if isinstance(value, float) and math.isnan(value):
        return "—"
    try:
        return f"{float(value):.12g}"
    except (TypeError, ValueError):
        return str(value)
