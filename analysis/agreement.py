"""How close the tables come to the published values: per table and per workload, over the cells the
paper prints, the median relative error of P and of T and how many published values lie inside our CI.

One measure, issue 38's: a cell's error is |ours − paper| / paper (our mean, the paper's mean); the
median is over the table's published cells (a workload's pooled line counts each table's cells, so a
point printed in four tables counts four times, as the paper prints it). A published value of 0 has
no relative error and is left out (counted in ``zero``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.formatting import to_markdown
from analysis.paper_result import TableResult, tidy

#: the metrics compared, by the paper's letter
METRICS = {"P": "late/proportion", "T": "turnaround/mean"}


@dataclass(frozen=True)
class Agreement:
    """One metric's agreement over a set of published cells."""

    cells: int
    error: float  # median |ours − paper| / paper (nan: no cell)
    inside: int  # published values inside our 95 % CI
    zero: int  # published values of 0, without a relative error

    @classmethod
    def of(cls, frame: pd.DataFrame) -> Agreement:
        """From tidy lines of one metric with ``mean``, ``half_width``, ``n`` and ``paper_mean``.

        >>> f = pd.DataFrame({"mean": [0.02, 0.01, 0.5], "half_width": [0.005, 0.02, 0.1], "n": [10] * 3,
        ...                   "paper_mean": [0.01, 0.0, 0.55]})
        >>> a = Agreement.of(f)
        >>> a.cells, round(a.error, 4), a.inside, a.zero  # errors 1 and 1/11; the paper's 0 has none
        (3, 0.5455, 2, 1)
        """
        both = frame[(frame["n"] > 0) & frame["mean"].notna() & frame["paper_mean"].notna()]
        gap = (both["mean"] - both["paper_mean"]).abs()
        nonzero = both["paper_mean"] != 0
        relative = gap[nonzero] / both["paper_mean"][nonzero].abs()
        return cls(cells=len(both), error=float(np.median(relative)) if len(relative) else float("nan"),
                   inside=int((gap <= both["half_width"]).sum()), zero=int((~nonzero).sum()))


def compared(results: list[TableResult]) -> dict[str, pd.DataFrame]:
    """Each table's tidy lines that have a published P or T, by table id (tables without any are left out)."""
    lines = {}
    for result in results:
        frame = tidy(result)
        frame = frame[frame["metric"].isin(METRICS.values()) & frame["paper_mean"].notna()]
        if len(frame):
            lines[result.table.id] = frame
    return lines


def table_line(label: str, frame: pd.DataFrame) -> list[str]:
    """One line of the section: published cells (how many ran, when not all), median error, inside our CI; P, then T."""
    out = [label]
    for metric in METRICS.values():
        lines = frame[frame["metric"] == metric]
        a = Agreement.of(lines)
        run = f" ({a.cells} run)" if a.cells < len(lines) else ""  # a table not fully run says so
        zero = f" ({a.zero} of them 0)" if a.zero else ""
        out += [f"{len(lines)}{run}{zero}", "—" if np.isnan(a.error) else f"{a.error:.3f}", f"{a.inside} of {a.cells}"]
    return out


def agreement_markdown(results: list[TableResult]) -> str:
    """The section of ``tables.md``: one line per table with published P or T, then one per experiment
    whose tables share it (a workload's factor tables), pooled; empty when no table has any."""
    lines = compared(results)
    if not lines:
        return ""
    rows = [table_line(tid, frame) for tid, frame in lines.items()]
    by_experiment: dict[str, list[str]] = {}
    for result in results:
        if result.table.id in lines:
            by_experiment.setdefault(result.table.experiment, []).append(result.table.id)
    rows += [table_line(f"**{' + '.join(ids)}**", pd.concat([lines[t] for t in ids]))
             for ids in by_experiment.values() if len(ids) > 1]
    columns = pd.MultiIndex.from_tuples([(letter, what) for letter in METRICS for what in
                                         ("published cells", "median error", "inside our CI")])
    frame = pd.DataFrame([r[1:] for r in rows], index=[(r[0],) for r in rows], columns=columns)
    return ("## Ours against the published values\n\n"
            "Per table, over the cells where the paper prints a value: the median error, |ours − paper| / paper "
            "(our mean, the paper's mean), and how many published values lie inside our 95 % CI; pooled "
            "lines take every cell of a workload's tables (a point the paper prints in several tables counts "
            "in each). `analysis/agreement.py`.\n\n" + to_markdown(frame, ["table"]) + "\n")
