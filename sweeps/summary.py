"""The per-policy table printed at the end of a sweep (``analysis/`` has the full CI table)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

COLUMNS = ("wait/mean", "bsld/mean", "util", "fairness/jain")
#: workflow runs (RM-DCWF's P, T, O): their presence is told by ``late/proportion``
WORKFLOW_COLUMNS = ("late/proportion", "turnaround/mean", "overhead/mean_s", "util")


def policy_labels(policies: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """Per run, its policy label plus what differs between the runs sharing that label (their options,
    or their class), so two different policies never share a row.

    >>> policy_labels([("easy", {"order": "fcfs"}), ("easy", {"order": "sjf"}), ("mine", {"_target_": "a.A"})])
    ['easy order=fcfs', 'easy order=sjf', 'mine']
    >>> policy_labels([("mine", {"_target_": "a.A"}), ("mine", {"_target_": "b.B"})])
    ['mine class=a.A', 'mine class=b.B']
    """
    values: dict[tuple[str, str], set[str]] = {}
    for label, policy in policies:
        for key, value in policy.items():
            values.setdefault((label, key), set()).add(repr(value))
    out = []
    for label, policy in policies:
        differing = [f"{'class' if k == '_target_' else k}={v}" for k, v in sorted(policy.items())
                     if len(values[(label, k)]) > 1]
        out.append(" ".join([label, *differing]))
    return out


def format_policy_table(results: Sequence[tuple[str, dict[str, Any], dict[str, float]]],
                        objective: Sequence[str] = ()) -> str:
    """Mean of each metric over the runs of each policy (``(label, policy config, metrics)`` per run,
    skipped runs included, from MLflow).

    A multi-resource run has ``util/<resource>`` instead of ``util``: each such column is shown;
    workflow runs show P, T, O and utilisation; the ``objective`` metrics (``sweep.objective``) are added.

    >>> print(format_policy_table([("easy", {}, {"wait/mean": 2.0, "util": 0.5})]))
    policy    runs     wait/mean     bsld/mean          util
    easy         1             2             -           0.5
    """
    groups: dict[str, list[dict[str, float]]] = {}
    for label, (_, _, metrics) in zip(policy_labels([(lab, pol) for lab, pol, _ in results]), results, strict=True):
        groups.setdefault(label, []).append(metrics)
    present = {key for _, _, metrics in results for key in metrics}
    if "late/proportion" in present:
        columns = [c for c in WORKFLOW_COLUMNS if c in present]
    else:
        columns = [c for c in COLUMNS if c in present or c in COLUMNS[:2]]
    columns += sorted(k for k in present if k.startswith("util/"))
    columns += [m for m in objective if m in present and m not in columns]  # what the sweeper optimised
    width = max([len("policy"), *map(len, groups)]) + 2
    widths = [max(14, len(c) + 2) for c in columns]
    lines = [f"{'policy':<{width}}{'runs':>6}" + "".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True))]
    for label, rows in sorted(groups.items()):
        cells = []
        for column, w in zip(columns, widths, strict=True):
            values = [r[column] for r in rows if column in r]
            cells.append(f"{np.mean(values):>{w}.4g}" if values else f"{'-':>{w}}")
        lines.append(f"{label:<{width}}{len(rows):>6}" + "".join(cells))
    return "\n".join(lines)
