"""The per-policy table printed at the end of a sweep (``analysis/`` has the full CI table)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

COLUMNS = ("wait/mean", "bsld/mean", "util")


def policy_label(cfg: dict[str, Any]) -> str:
    """``easy`` or ``easy/sjf``: the policy name and its non-default options."""
    policy = {k: v for k, v in (cfg.get("policy") or {}).items() if not k.startswith("_")}
    name = str(policy.pop("name", "?"))
    if policy.get("order") == "fcfs":
        policy.pop("order")
    return "/".join([name, *(str(v) for _, v in sorted(policy.items()))])


def format_policy_table(results: Sequence[tuple[dict[str, Any], dict[str, float]]]) -> str:
    """Mean of each metric over the runs of each policy (skipped runs included, from MLflow).

    >>> print(format_policy_table([({"policy": {"name": "easy"}}, {"wait/mean": 2.0, "util": 0.5})]))
    policy      runs     wait/mean     bsld/mean          util
    easy           1             2             -           0.5
    """
    groups: dict[str, list[dict[str, float]]] = {}
    for cfg, metrics in results:
        groups.setdefault(policy_label(cfg), []).append(metrics)
    lines = [f"{'policy':<10}{'runs':>6}" + "".join(f"{c:>14}" for c in COLUMNS)]
    for label, rows in sorted(groups.items()):
        cells = []
        for column in COLUMNS:
            values = [r[column] for r in rows if column in r]
            cells.append(f"{np.mean(values):>14.4g}" if values else f"{'-':>14}")
        lines.append(f"{label:<10}{len(rows):>6}" + "".join(cells))
    return "\n".join(lines)
