"""Significant digits and the three table renderings: Markdown (terminal), LaTeX (booktabs), CSV.

Digits rule (the usual metrology convention): the half-width keeps **two significant digits**
and the mean is rounded to the **same decimal place**, i.e. to one digit past the half-width's
leading significant digit — ``1466.3 ± 4.6``, ``0.113 ± 0.012``, ``52000 ± 13000``. A cell with
n = 1 has no half-width and shows the mean to four significant digits and ``—``
(``1466 ± —``); a cell with no data shows ``—``; a half-width of 0 (or below 1e-9 of the mean:
floating-point noise of identical values) shows ``± 0``. Table cells also show their number of
replications (or pairs), ``1466.3 ± 4.6 (n=30)``, since cells of one table may differ in n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from analysis.stats import COLUMN, level_text

DASH = "—"
TIME_GROUPS = {"wait", "turnaround", "makespan", "runtime", "response", "flow", "late"}


def metric_unit(metric: str) -> str:
    """Unit of a metric from its group: seconds for times, ``""`` for ratios and counts.

    >>> metric_unit("wait/p95"), metric_unit("util/cpu"), metric_unit("late/proportion")
    ('s', '', '')
    """
    group, _, name = metric.partition("/")
    if group == "late" and name in ("proportion", "count", "jobs"):
        return ""
    return "s" if group in TIME_GROUPS else ""


def metric_label(metric: str) -> str:
    """``wait/mean (s)``: the metric with its unit, for headers and axes (once: a label that already
    ends with its unit is kept).

    >>> metric_label("wait/mean"), metric_label("wait/mean (s)"), metric_label("util/cpu")
    ('wait/mean (s)', 'wait/mean (s)', 'util/cpu')
    """
    unit = metric_unit(metric)
    return f"{metric} ({unit})" if unit and not metric.endswith(f"({unit})") else metric


def significant(x: float, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits, no scientific notation, no trailing zeros.

    >>> significant(1466.3456), significant(0.0123456), significant(17544.2), significant(3.0)
    ('1466', '0.01235', '17544', '3')
    """
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = _fixed(x, decimals)
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_pm(mean: float, half_width: float, n: int, pm: str = " ± ", dash: str = DASH) -> str:
    """One table cell, ``mean ± half-width`` with the module's digits rule.

    >>> format_pm(1466.31, 4.62, 30), format_pm(0.1134, 0.01234, 30), format_pm(52312.0, 12915.0, 5)
    ('1466.3 ± 4.6', '0.113 ± 0.012', '52000 ± 13000')
    >>> format_pm(1466.31, float("nan"), 1), format_pm(float("nan"), float("nan"), 0), format_pm(0.2, 1.4e-15, 3)
    ('1466 ± —', '—', '0.2 ± 0')
    """
    if n == 0 or not math.isfinite(mean):
        return dash
    if n < 2 or not math.isfinite(half_width):
        return f"{significant(mean)}{pm}{dash}"
    if half_width <= 1e-9 * max(abs(mean), 1e-300):  # exactly 0, or floating-point noise
        return f"{significant(mean)}{pm}0"
    decimals = 1 - math.floor(math.log10(half_width))
    rounded = round(half_width, decimals)
    if rounded >= 10 ** (2 - decimals):  # 9.96 → 10: now three digits; keep two
        decimals -= 1
    return f"{_fixed(mean, decimals)}{pm}{_fixed(half_width, decimals)}"


def _fixed(x: float, decimals: int) -> str:
    """``x`` rounded to ``decimals`` places (negative: tens, hundreds …), no ``-0``."""
    value = round(x, decimals)
    text = f"{value:.{max(decimals, 0)}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def wide_cells(
    summary: pd.DataFrame,
    rows: Sequence[str],
    metrics: Sequence[str],
    columns: Sequence[str],
    star: bool = False,
    pm: str = " ± ",
    dash: str = DASH,
) -> pd.DataFrame:
    """Formatted cells: one row per row-factor level, columns ``(metric, column label)``.

    ``summary`` is :func:`analysis.stats.aggregate` (or ``paired_differences``) output. Each cell with
    data ends in its ``(n=…)``; ``star`` appends `` *`` to cells whose ``excludes_zero`` is true.
    """
    frame = summary.copy()
    frame["cell"] = [
        format_pm(m, h, n, pm, dash) + (f" (n={n})" if n else "")
        for m, h, n in zip(frame["mean"], frame["half_width"], frame["n"], strict=True)
    ]
    if star:
        frame.loc[frame["excludes_zero"].astype(bool), "cell"] += " *"
    if rows:
        frame["_row"] = list(zip(*(frame[r].map(level_text) for r in rows), strict=True))
        row_order = list(dict.fromkeys(frame.sort_values(list(rows))["_row"]))
    else:
        frame["_row"] = [("all runs",)] * len(frame)
        row_order = [("all runs",)]
    wide = frame.pivot_table(index="_row", columns=["metric", COLUMN], values="cell", aggfunc="first")
    grid = pd.MultiIndex.from_product([list(metrics), list(columns)], names=["metric", COLUMN])
    return wide.reindex(index=row_order, columns=grid).fillna(dash)


def to_markdown(cells: pd.DataFrame, rows: Sequence[str]) -> str:
    """A GitHub Markdown table, padded so it also reads well in a terminal."""
    header = [*(rows or [""]), *(f"{metric_label(m)}: {c}" for m, c in cells.columns)]
    body = [[*index, *values] for index, values in zip(cells.index, cells.to_numpy().tolist(), strict=True)]
    widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(len(header))]
    n_rows = len(rows) or 1

    def line(values: Sequence[str]) -> str:
        pairs = enumerate(zip(values, widths, strict=True))
        padded = [str(v).ljust(w) if i < n_rows else str(v).rjust(w) for i, (v, w) in pairs]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i >= n_rows else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in body)])


def to_latex(cells: pd.DataFrame, rows: Sequence[str], caption: str = "", label: str = "") -> str:
    """A booktabs ``table``: metrics as spanning headers over the column levels, ``$\\pm$`` cells."""
    metrics = list(dict.fromkeys(cells.columns.get_level_values(0)))
    levels = list(dict.fromkeys(cells.columns.get_level_values(1)))
    n_rows = len(rows) or 1
    spec = "l" * n_rows + " ".join("r" * len(levels) for _ in metrics)
    lines = [r"\begin{table}[t]", r"\centering", rf"\begin{{tabular}}{{{spec}}}", r"\toprule"]
    spans, rules = [], []
    for k, metric in enumerate(metrics):
        first = n_rows + 1 + k * len(levels)
        spans.append(rf"\multicolumn{{{len(levels)}}}{{c}}{{{latex_escape(metric_label(metric))}}}")
        rules.append(rf"\cmidrule(lr){{{first}-{first + len(levels) - 1}}}")
    lines.append(" & " * n_rows + " & ".join(spans) + r" \\")
    lines.append(" ".join(rules))
    names = [latex_escape(r) for r in (rows or [""])]
    lines.append(" & ".join(names + [latex_escape(c) for _ in metrics for c in levels]) + r" \\")
    lines.append(r"\midrule")
    for index, values in zip(cells.index, cells.to_numpy().tolist(), strict=True):
        row = [latex_escape(str(v)) for v in index] + [_latex_cell(v) for v in values]
        lines.append(" & ".join(row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def _latex_cell(cell: str) -> str:
    return latex_escape(cell).replace(" *", "$^{*}$")


def latex_escape(text: str) -> str:
    r"""Escape LaTeX's special characters (and spell ``±``, dashes and ``Δ`` in ASCII LaTeX).

    >>> print(latex_escape("wait_p95 & 5% ± 1–3"))
    wait\_p95 \& 5\% $\pm$ 1--3
    """
    table = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
             "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
             "±": r"$\pm$", "–": "--", "—": "---", "−": "$-$", "Δ": r"$\Delta$", "√": r"$\surd$"}
    return "".join(table.get(ch, ch) for ch in text)


def tidy_csv(summary: pd.DataFrame, cols: Sequence[str]) -> str:
    """The long summary as CSV: factor columns, the column factor, metric, mean, sd, n, half-width, CI."""
    return summary.rename(columns={COLUMN: "-".join(cols)}).to_csv(index=False)


def caption(summary: pd.DataFrame, what: str = "mean ± 95% CI half-width (Student t)",
            unit: str = "replications") -> str:
    """``<what> over n = 5 replications per cell`` (or ``n = 3–5``) from the summary's counts."""
    counts = summary.loc[summary["n"] > 0, "n"]
    if counts.empty:
        return f"{what}; no data"
    lo, hi = int(counts.min()), int(counts.max())
    span = f"{lo}" if lo == hi else f"{lo}–{hi}"
    return f"{what}; n = {span} {unit} per cell"
