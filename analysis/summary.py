"""From a :class:`RunSet` to the numbers (:func:`analyse`), the terminal text and the table files.

:func:`write_tables` writes ``tables/ci.{csv,tex,md}`` (CSV: tidy, one row per cell and metric
with mean, sd, n, half-width and CI bounds) and ``tables/paired.{csv,tex,md}``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis import AnalysisError
from analysis.formatting import caption, tidy_csv, to_latex, to_markdown, wide_cells
from analysis.runs import SEED_KEY, RunSet
from analysis.stats import COLUMN, aggregate, column_labels, level_text, no_spread, paired_differences

DEFAULT_METRICS = ("wait/mean", "bsld/mean", "util")
PAIRED_NOTE = ("mean paired difference (column − baseline) over shared seeds ± 95% CI (t); * = CI excludes 0 "
               "(never claimed from n < 2 or zero variance)")
POOL_CODE_FLAG = "--pool-code"


@dataclass
class Analysis:
    """Everything the tables and figures need, computed once from the runs."""

    runs: RunSet
    rows: list[str]
    cols: list[str]
    metrics: list[str]
    seed_key: str
    varying: list[str]
    design: pd.DataFrame
    summary: pd.DataFrame
    levels: list[str]
    baseline: str | None
    paired: pd.DataFrame | None
    notes: list[str] = field(default_factory=list)

    @property
    def col_name(self) -> str:
        """The column factor(s) as one name (``policy``, ``a-b``)."""
        return "-".join(self.cols)

    def ci_cells(self) -> pd.DataFrame:
        return wide_cells(self.summary, self.rows, self.metrics, self.levels)

    def paired_cells(self) -> pd.DataFrame | None:
        if self.paired is None:
            return None
        others = [level for level in self.levels if level != self.baseline]
        cells = wide_cells(self.paired, self.rows, self.metrics, others, star=True)
        return cells.rename(columns=lambda level: f"{level} − {self.baseline}", level=1)


def analyse(
    runs: RunSet,
    rows: Sequence[str] | None = None,
    cols: Sequence[str] = ("policy",),
    metrics: Sequence[str] = DEFAULT_METRICS,
    baseline: str | None = None,
    seed_key: str = SEED_KEY,
    pool_code: bool = False,
) -> Analysis:
    """Resolve factor and metric names, aggregate, and compare with ``baseline`` (default: first level).

    ``rows`` defaults to every config key that varies (see :func:`analysis.runs.varying_keys`), except
    options of a column factor that not every column level ran at every value of (``policy.max_overtakes``
    of one policy swept beside a baseline without it): those, and any such option given in ``cols``, name
    variants of their level instead (``capsjf max_overtakes=2``, :func:`fold_into_columns`), each its own
    column paired with the baseline. ``baseline`` may name a policy with one variant by its label.
    A cell whose runs come from different simulator code (``schedlab.code`` tags; untagged runs
    count as one "unknown" fingerprint) is refused unless ``pool_code``.
    """
    asked = [runs.resolve_factor(c, seed_key) for c in cols]
    col_keys = [c for c in asked if not option_of(c, asked)]
    varying = runs.varying(seed_key, col_keys)
    if rows is None:
        row_keys = [k for k in varying if not k.endswith("._target_")
                    and not (option_of(k, col_keys) and not crossed(runs.params, k, col_keys))]
    else:
        row_keys = [runs.resolve_factor(r, seed_key) for r in rows]
    row_keys = [r for r in dict.fromkeys(row_keys) if r not in col_keys]
    metric_names = [runs.resolve_metric(m) for m in metrics]
    if not metric_names:
        raise AnalysisError("no metrics requested")
    design = runs.design(list(dict.fromkeys([*row_keys, *varying, *col_keys])), metric_names, seed_key)
    folded = [k for k in varying if k not in row_keys and option_of(k, col_keys)]
    unfolded = column_labels(design, col_keys)
    notes = fold_into_columns(design, col_keys, folded)
    varying = [k for k in varying if k not in folded]
    notes += code_notes(runs, design, row_keys, col_keys, pool_code)
    summary = aggregate(design, row_keys, col_keys, metric_names)
    levels = level_order(column_labels(design, col_keys), unfolded, design[folded])
    notes += spread_notes(summary, "CI table", "replications")
    pooled = [k for k in varying if k not in row_keys]
    if pooled:
        notes.append(f"cells pool runs over the varying key(s) not used as rows: {', '.join(pooled)}")
    chosen = levels[0] if baseline is None else resolve_level(baseline, levels, "-".join(col_keys))
    levels = [chosen, *(level for level in levels if level != chosen)]
    notes += [f"row {k} is an option of {'-'.join(col_keys)} that not every {'-'.join(col_keys)} ran at every "
              f"value of: runs pair only within one value; without it in --rows each variant is its own column, "
              f"paired with {chosen}" for k in row_keys if option_of(k, col_keys) and not crossed(design, k, col_keys)
              and len(levels) > 1]
    paired = None
    if len(levels) > 1:
        try:
            paired = paired_differences(design, row_keys, col_keys, metric_names, chosen, varying, seed_key)
        except AnalysisError as exc:
            notes.append(f"no paired comparison: {exc}")
        else:
            notes += spread_notes(paired, "paired", "pairs", " — no significance claimed for them")
    return Analysis(runs, row_keys, col_keys, metric_names, seed_key, varying, design, summary, levels,
                    chosen if paired is not None else None, paired, notes)


def option_of(key: str, cols: Sequence[str]) -> bool:
    """Whether ``key`` configures one of the column factors ``cols`` (``policy.max_overtakes`` of ``policy``).

    >>> option_of("policy.max_overtakes", ["policy"]), option_of("policy", ["policy"])
    (True, False)
    """
    return any(key.startswith(f"{c}.") for c in cols if c != key)


def crossed(design: pd.DataFrame, key: str, cols: Sequence[str]) -> bool:
    """Whether every column level ran at every value of ``key`` (a missing value counts as one), so
    ``key`` can be a row with runs paired within each value.

    >>> d = pd.DataFrame({"policy": ["a", "a", "b", "b"], "policy.order": ["x", "y", "x", "y"],
    ...                   "policy.cap": [2, 5, None, None]})
    >>> crossed(d, "policy.order", ["policy"]), crossed(d, "policy.cap", ["policy"])
    (True, False)
    """
    values = design[key].map(level_text)
    return values.groupby(column_labels(design, cols)).agg(frozenset).nunique() == 1


def level_order(labels: pd.Series, unfolded: pd.Series, options: pd.DataFrame) -> list[str]:
    """Column levels (``labels`` of the runs) in the order of their ``unfolded`` label (text), then of the
    values of the folded ``options`` (numbers numerically, a run without the option first).

    >>> unfolded = pd.Series(["mine", "mine", "easy"])
    >>> labels = pd.Series(["mine cap=10", "mine cap=2", "easy"])
    >>> level_order(labels, unfolded, pd.DataFrame({"policy.cap": [10, 2, None]}))
    ['easy', 'mine cap=2', 'mine cap=10']
    """
    keys = options.assign(**{COLUMN: unfolded.to_numpy()})
    order = keys.sort_values([COLUMN, *options.columns], na_position="first", kind="stable").index
    return list(dict.fromkeys(labels.loc[order]))


def resolve_level(name: str, levels: Sequence[str], factor: str) -> str:
    """The column level a user means by ``name``: the level itself, else the one variant of a level
    with that label (``easy`` for ``easy order=sjf`` when easy ran no other variant).

    >>> resolve_level("easy", ["capsjf max_overtakes=2", "easy order=sjf"], "policy")
    'easy order=sjf'
    """
    if name in levels:
        return name
    variants = [level for level in levels if level.startswith(f"{name} ")]
    if len(variants) == 1:
        return variants[0]
    if variants:
        raise AnalysisError(f"ambiguous baseline {name!r}: {factor} levels {', '.join(variants)}; "
                            f"name one in full, e.g. --baseline '{variants[0]}'")
    raise AnalysisError(f"unknown baseline {name!r}; {factor} levels: {', '.join(sorted(levels))}")


def fold_into_columns(design: pd.DataFrame, cols: list[str], keys: list[str]) -> list[str]:
    """Make a column level name one configuration: where ``keys`` (options or class of the column factor,
    e.g. ``policy._target_`` under ``policy``, not shown as rows) differ between runs of one level, the
    level becomes ``label key=value …`` (in place; an option a run lacks is left out), so two policies
    never share a cell or a pairing.

    >>> d = pd.DataFrame({"policy": ["mine", "mine", "easy"], "policy._target_": ["a.A", "b.B", "s.Easy"]})
    >>> fold_into_columns(d, ["policy"], ["policy._target_"])
    ["policy level 'mine' holds 2 different configurations (policy._target_): shown apart"]
    >>> list(d["policy"])
    ['mine class=a.A', 'mine class=b.B', 'easy']
    """
    notes = []
    for col in cols:
        mine = [k for k in keys if k.startswith(f"{col}.")]
        for level, group in design.groupby(col, dropna=False, sort=True):
            differing = [k for k in mine if group[k].nunique(dropna=False) > 1]
            if not differing:
                continue
            names = {c: "class" if c.endswith("._target_") else c.removeprefix(f"{col}.") for c in differing}
            text = group[differing].apply(lambda row, names=names: "".join(
                f" {names[c]}={level_text(v)}" for c, v in row.items() if not pd.isna(v)), axis=1)
            design.loc[group.index, col] = level_text(level) + text
            configurations = len(group[differing].drop_duplicates())
            notes.append(f"{col} level {level_text(level)!r} holds {configurations} different configurations "
                         f"({', '.join(differing)}): shown apart")
    return notes


def code_notes(runs: RunSet, design: pd.DataFrame, rows: list[str], cols: list[str], pool_code: bool) -> list[str]:
    """Refuse (or, with ``pool_code``, note) cells pooling runs of different code fingerprints."""
    cells = design[rows].assign(**{COLUMN: column_labels(design, cols), "code": runs.code_fingerprints()})
    groups = cells.groupby([*rows, COLUMN], dropna=False, sort=True)["code"]
    mixed = [(key, codes) for key, codes in groups if codes.nunique() > 1]
    if not mixed:
        return []
    if pool_code:
        return [f"{len(mixed)} cell(s) pool runs of different simulator code (schedlab.code), as asked"]
    key, codes = mixed[0]
    names = [*rows, "-".join(cols)]
    where = ", ".join(f"{k}={level_text(v)}" for k, v in zip(names, key if isinstance(key, tuple) else (key,),
                                                              strict=True))
    versions = ", ".join(f"{code[:12]}: {n} run(s)" for code, n in codes.value_counts().items())
    raise AnalysisError(f"{len(mixed)} cell(s) mix runs of different simulator code, e.g. {where} ({versions}); "
                        f"select one sweep with --sweep, rerun it, or pass {POOL_CODE_FLAG} to pool them anyway")


def spread_notes(summary: pd.DataFrame, table: str, unit: str, consequence: str = "") -> list[str]:
    """A note counting the ``table``'s cells with data whose CI says nothing (n < 2 or zero variance)."""
    with_data = summary[summary["n"] > 0]
    flat = no_spread(with_data)
    if not flat.any():
        return []
    single = int((with_data["n"] < 2).sum())
    identical = int(flat.sum()) - single
    parts = [f"{single} with n = 1"] if single else []
    if identical:
        parts.append(f"{identical} with zero variance over their {unit} (identical results: does the workload "
                     "depend on the seed?)")
    return [f"{int(flat.sum())} of {len(with_data)} {table} cells have no spread: {'; '.join(parts)}{consequence}"]


def header(a: Analysis) -> str:
    """Two lines: what was read and how the table is laid out."""
    runs = a.runs
    dropped = "; ".join(f"{n} {why}" for why, n in runs.dropped.items())
    return (
        f"Experiment {runs.experiment!r} ({runs.tracking_uri}): {len(runs.params)} finished runs, "
        f"{len(runs.failed)} failed" + (f" (left out: {dropped})" if dropped else "") + "\n"
        f"rows: {', '.join(a.rows) or '(none)'} | columns: {a.col_name} | varying: "
        f"{', '.join(a.varying) or '(none)'} | replication key: {a.seed_key}"
    )


def terminal_text(a: Analysis) -> str:
    """What ``--table-only`` prints: the CI table, the paired comparison, failures and notes."""
    parts = [header(a), "", to_markdown(a.ci_cells(), a.rows), caption(a.summary)]
    paired = a.paired_cells()
    if paired is not None:
        parts += ["", f"Paired differences vs {a.baseline} (same seed, same jobs):",
                  to_markdown(paired, a.rows), caption(a.paired, PAIRED_NOTE, "pairs")]
    if len(a.runs.failed):
        parts += ["", f"FAILED runs ({len(a.runs.failed)}):", *(f"  {line}" for line in failed_lines(a))]
    parts += [f"note: {n}" for n in a.notes]
    return "\n".join(parts)


def failed_lines(a: Analysis) -> list[str]:
    """``run_id  key=value …  error`` for each failed run (varying keys, columns and seed only)."""
    failed = a.runs.failed
    keys = [k for k in [*a.cols, *a.varying, a.seed_key] if k in failed]
    lines = []
    for run_id, row in failed.iterrows():
        config = " ".join(f"{k}={level_text(row[k])}" for k in keys)
        error = row.get("error")
        error = ("no schedlab.error tag" if pd.isna(error) else str(error)).strip().splitlines()
        lines.append(f"{run_id[:12]}  {config}  {error[-1] if error else ''}")
    return lines


def write_tables(a: Analysis, out: Path) -> dict[str, Path]:
    """CI and paired tables as CSV, LaTeX and Markdown under ``out/tables``."""
    folder = out / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    slug = re.sub(r"[^A-Za-z0-9]+", "-", a.runs.experiment).strip("-").lower()
    tables = [("ci", a.summary, a.ci_cells(), caption(a.summary))]
    if a.paired is not None:
        tables.append(("paired", a.paired, a.paired_cells(), f"{PAIRED_NOTE} (baseline {a.baseline})"))
    for name, summary, cells, text in tables:
        (folder / f"{name}.csv").write_text(tidy_csv(summary, a.cols))
        (folder / f"{name}.tex").write_text(to_latex(cells, a.rows, text, f"tab:{slug}-{name}"))
        (folder / f"{name}.md").write_text(to_markdown(cells, a.rows) + "\n")
        written[name] = folder / f"{name}.md"
    return written

