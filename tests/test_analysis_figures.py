"""analysis figures and schedule geometry, on synthetic frames (no MLflow store needed)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import AnalysisError
from analysis.figures import (
    plot_dominant_shares,
    plot_gantt,
    plot_metric_vs_factor,
    plot_utilisation,
    plot_wait_ecdf,
)
from analysis.timeline import assign_nodes, busy_steps

PNG = b"\x89PNG\r\n\x1a\n"


def assert_figure_files(paths: list[Path]) -> None:
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    png, pdf = (p.read_bytes() for p in paths)
    assert png.startswith(PNG) and len(png) > 2000
    assert pdf.startswith(b"%PDF-") and b"%%EOF" in pdf[-64:]


def list_schedule(jobs: list[tuple[float, int, float]], capacity: int) -> pd.DataFrame:
    """FCFS list scheduling of (submit, nodes, runtime): a schedule that never exceeds ``capacity``."""
    rows, running, clock = [], [], 0.0
    for job_id, (submit, nodes, runtime) in enumerate(sorted(jobs, key=lambda j: j[0])):
        clock = max(clock, submit)
        while sum(n for _, n in running if _ > clock) + nodes > capacity:
            clock = min(end for end, n in running if end > clock)
        running.append((clock + runtime, nodes))
        rows.append((job_id, submit, clock, clock + runtime, nodes))
    frame = pd.DataFrame(rows, columns=["job_id", "submit_time", "start_time", "end_time", "nodes"])
    return frame.assign(wait=frame["start_time"] - frame["submit_time"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50).map(float), st.integers(1, 8), st.integers(0, 30).map(float)),
                min_size=1, max_size=25))
def test_assigned_nodes_never_overlap(jobs: list[tuple[float, int, float]]) -> None:
    schedule = list_schedule(jobs, capacity=8)
    blocks = assign_nodes(schedule, 8)
    assert blocks.groupby("job_id")["n_nodes"].sum().to_dict() == schedule.set_index("job_id")["nodes"].to_dict()
    assert ((blocks["first_node"] >= 0) & (blocks["first_node"] + blocks["n_nodes"] <= 8)).all()
    cells = blocks.loc[blocks.index.repeat(blocks["n_nodes"])].copy()
    cells["node"] = cells["first_node"] + cells.groupby(level=0).cumcount()
    for _, on_node in cells[cells["end_time"] > cells["start_time"]].groupby("node"):
        ordered = on_node.sort_values("start_time")
        assert (ordered["start_time"].to_numpy()[1:] >= ordered["end_time"].to_numpy()[:-1]).all()


def test_lowest_free_ids_and_capacity_errors() -> None:
    jobs = pd.DataFrame({"job_id": [7, 8, 9], "start_time": [0.0, 0.0, 10.0], "end_time": [10.0, 20.0, 15.0],
                         "nodes": [3, 2, 3]})
    blocks = assign_nodes(jobs)  # capacity = peak use = 5; job 9 reuses job 7's ids 0-2 at t = 10
    assert blocks[["job_id", "first_node", "n_nodes"]].values.tolist() == [[7, 0, 3], [8, 3, 2], [9, 0, 3]]
    with pytest.raises(AnalysisError, match="job 8 needs 2 nodes at t=0 but only 1 of 4 are free"):
        assign_nodes(jobs, capacity=4)
    with pytest.raises(AnalysisError, match="fractional"):
        assign_nodes(jobs.assign(nodes=[0.5, 1, 1]))
    assert busy_steps(jobs)["busy"].tolist() == [5.0, 5.0, 2.0, 0.0]


@pytest.fixture(scope="module")
def design() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = [{"workload.arrival_rate": rate, "policy": policy, "seed": seed, "cluster.nodes": nodes,
             "wait/mean": 3600 * rate * (2 if policy == "conservative" else 1) + rng.normal(0, 300), "util": 0.7}
            for rate in (0.001, 0.01, 0.1) for policy in ("easy", "conservative") for seed in range(3)
            for nodes in (16, 32)]
    return pd.DataFrame(rows)


def test_metric_vs_factor_numeric_categorical_and_faceted(design: pd.DataFrame, tmp_path: Path) -> None:
    assert_figure_files(plot_metric_vs_factor(design, "workload.arrival_rate", "wait/mean", "policy",
                                              tmp_path, "numeric", facet="cluster.nodes"))
    single = design[design["seed"] == 0]  # n = 1 everywhere: points without error bars, no NaN trouble
    assert_figure_files(plot_metric_vs_factor(single, "policy", "util", "policy", tmp_path, "categorical"))


def test_wait_ecdf(tmp_path: Path) -> None:
    schedule = list_schedule([(float(i), 1 + i % 8, 20.0) for i in range(60)], 8)
    waits = pd.concat([schedule.assign(policy=p, rate=r, run=f"{p}{r}") for p in ("easy", "conservative")
                       for r in (1, 2)])
    assert_figure_files(plot_wait_ecdf(waits, "policy", tmp_path, "ecdf", facet="rate"))


def test_gantt_and_utilisation(tmp_path: Path) -> None:
    schedule = list_schedule([(float(3 * i), 1 + (7 * i) % 16, 30.0 + i % 5) for i in range(80)], 16)
    assert_figure_files(plot_gantt(schedule, tmp_path, "gantt", first_n=20, capacity=16))
    multi = schedule.assign(cpu=schedule["nodes"] * 2.5, mem=schedule["nodes"] * 0.5)
    assert_figure_files(plot_utilisation(multi, tmp_path, "util", {"cpu": 40.0, "mem": None}))


def test_dominant_shares(tmp_path: Path) -> None:
    shares = pd.DataFrame({"time": [0.0, 1, 2, 3] * 2, "user": ["A"] * 4 + ["B"] * 4,
                           "dominant_share": [0, 1 / 3, 2 / 3, 2 / 3, 0, 1 / 3, 1 / 3, 2 / 3]})
    assert_figure_files(plot_dominant_shares(shares, tmp_path))
    both = pd.concat([shares.assign(policy="drf"), shares.assign(policy="cpu_fair")])
    assert_figure_files(plot_dominant_shares(both, tmp_path, "per_policy", facet="policy"))


@pytest.mark.parametrize("module", ["runs", "stats", "formatting", "timeline", "figures", "summary", "assemble"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(f"analysis.{module}"))
    assert result.failed == 0


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list:
    """The figures the plot functions would save, kept open for inspection."""
    from analysis import figures

    kept: list = []
    monkeypatch.setattr(figures, "save", lambda fig, out, stem: kept.append(fig) or [])
    return kept


def test_times_keep_the_tables_unit_and_paths_their_short_names(drawn: list, tmp_path: Path) -> None:
    """Tables say s; a figure of the same metric said h, and full trace paths overlapped on the x axis."""
    paths = ["traces/KTH-SP2-1996-2.1-cln.swf", "traces/NASA-iPSC-1993-3.1-cln.swf"]
    design = pd.DataFrame({"workload.path": paths * 2,
                           "policy": ["easy"] * 2 + ["fcfs"] * 2, "wait/mean": [9e3, 40.0, 4e5, 60.0]})
    plot_metric_vs_factor(design, "workload.path", "wait/mean", "policy", tmp_path, "m")
    ax = drawn[0].axes[0]
    assert ax.get_ylabel() == "wait/mean (s)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["KTH-SP2-1996-2.1-cln", "NASA-iPSC-1993-3.1-cln"]


def test_wait_ecdf_panels_have_their_own_axis_and_factor_titles(drawn: list, tmp_path: Path) -> None:
    short = list_schedule([(float(i), 1, 1.0) for i in range(20)], 8).assign(trace="a/short.swf", run="s")
    long = list_schedule([(0.0, 8, 5000.0)] * 5, 8).assign(trace="a/long.swf", run="l")
    plot_wait_ecdf(pd.concat([short, long]).assign(policy="easy"), "policy", tmp_path, "e", facet="trace")
    axes = drawn[0].axes
    assert sorted(ax.get_title() for ax in axes) == ["trace = long", "trace = short"]
    assert len({ax.get_xlim() for ax in axes}) == 2 and all(ax.get_xlabel() in ("wait (s)", "") for ax in axes)


def test_long_utilisation_is_binned_into_a_line(drawn: list, tmp_path: Path) -> None:
    from analysis.figures import UTIL_BINS

    schedule = list_schedule([(float(3 * i), 1 + (7 * i) % 16, 30.0 + i % 5) for i in range(3000)], 16)
    plot_utilisation(schedule, tmp_path, "u", {"nodes": 16.0})
    ax = drawn[0].axes[0]
    assert len(ax.get_lines()[0].get_xdata()) <= UTIL_BINS + 1
    assert f"means over {UTIL_BINS} bins" in ax.get_title()


def test_gantt_window_is_not_stretched_by_one_long_job(drawn: list, tmp_path: Path) -> None:
    """The first jobs' window used to run to the longest job's end, squashing the rest into slivers."""
    jobs = [(0.0, 4, 100000.0)] + [(float(i), 2, 50.0) for i in range(1, 30)]
    plot_gantt(list_schedule(jobs, 16), tmp_path, "g", first_n=30, capacity=16)
    fig = drawn[0]
    assert fig.axes[0].get_xlim()[1] < 2000 and "run on past the right edge" in fig.axes[0].get_title()
    fig.canvas.draw()
    assert fig.get_tightbbox().width < 2 * fig.get_figwidth()  # no label outside the axes stretches it (inches)
