"""analysis/run_length.py (issue 38 item 3): the per-run tail statistics from a per-workflow table, built
in memory (no Ray, no store): warm-up exclusion in (arrival, id) order, the quarter split, late vs on-time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.run_length import LOGGED, STATS, tables, tail_stats
from sim.stats import t_half_width


def workflow_table(turnarounds: list[float], deadlines: list[float], warmup_turnaround: float, warmup: int):
    """``warmup`` early workflows with a huge turnaround, then one workflow per ``turnarounds`` entry (arriving at
    10, 20, …, each allowed to start at its arrival); rows shuffled, so only sorting by (arrival, id) finds
    the warm-up."""
    n = warmup + len(turnarounds)
    arrival = np.arange(n, dtype=float) * 10.0
    turn = np.array([warmup_turnaround] * warmup + list(turnarounds))
    deadline = arrival + np.array([1e9] * warmup + list(deadlines))
    completion = arrival + turn
    table = pd.DataFrame({"job_id": np.arange(n), "arrival": arrival, "earliest_start": arrival,
                          "deadline": deadline, "completion": completion, "late": completion > deadline})
    return table.sample(frac=1.0, random_state=3).reset_index(drop=True)


def test_statistics_leave_out_the_warm_up_and_split_quarters_in_arrival_order():
    # 8 measured workflows: quarters of 2 in arrival order; the last two are late (deadline 50 after arrival)
    turn = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 100.0, 300.0]
    s = tail_stats(workflow_table(turn, [1e9] * 6 + [50.0, 50.0], warmup_turnaround=1e6, warmup=3), warmup=3)
    assert s["T (s)"] == pytest.approx(np.mean(turn))  # the three 1e6 warm-up workflows are out
    assert s["T on-time"] == pytest.approx(35.0)
    assert s["max"] == 300.0
    assert s["T first ¼"] == 15.0 and s["T last ¼"] == 200.0
    assert s["P (%)"] == 25.0 and s["late"] == 2.0
    assert s["late median"] == 200.0 and s["on-time median"] == 35.0
    assert s["median"] == 45.0
    assert s["p99"] == pytest.approx(np.percentile(turn, 99))


def test_a_run_without_late_workflows_has_no_late_median():
    s = tail_stats(workflow_table([5.0, 6.0, 7.0, 8.0, 9.0], [1e9] * 5, 1.0, warmup=1), warmup=1)
    assert s["late"] == 0.0 and np.isnan(s["late median"]) and s["on-time median"] == 7.0
    assert s["T first ¼"] == 5.5 and s["T last ¼"] == 9.0  # array_split of 5: 2, 1, 1, 1


def test_tables_average_over_seeds_with_the_project_ci():
    rows = [{"workload": "ligo", "reading": "deadline/align/forced", "size": 54.0, "jobs": 2000, "seed": seed,
             **dict.fromkeys([*STATS, *LOGGED], 1.0), "T (s)": t} for seed, t in enumerate([1000.0, 1100.0, 1300.0])]
    text = tables(pd.DataFrame(rows))
    half = float(t_half_width(np.std([1000.0, 1100.0, 1300.0], ddof=1), 3))
    assert round(half, -1) == 380.0  # t(0.975, 2) · sd / √3 = 379.2, printed to two digits
    assert "| ligo | deadline/align/forced | 54 | 2,000 | 3 | 1 ± 0 | 1 ± 0 | 1130 ± 380 | 1 ± 0 |" in text
