"""A researcher's policy swept over one of its options beside a baseline that lacks it (issue 37).

``policy=capsjf,easy policy.max_overtakes=2,5 seed=range(0,5)`` records capsjf runs with the param
``policy.max_overtakes`` and easy runs without it. Each capsjf variant is its own column, paired with
easy on the same seeds, and the schedule figures show the policy being studied, not the baseline.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from analysis import AnalysisError
from analysis.assemble import example_run, studied_level
from analysis.formatting import to_markdown
from analysis.report import main
from analysis.runs import load_runs
from analysis.summary import analyse, terminal_text
from sim.stats import t_half_width
from tests.test_analysis import Store, jobs_table

SEEDS = range(5)
CAPS = (2, 5)
VARIANTS = [f"capsjf max_overtakes={cap}" for cap in CAPS]
METRICS = ["wait/mean", "bsld/mean"]


def metrics_of(policy: str, seed: int, cap: int | None = None) -> dict[str, float]:
    """Per-seed numbers whose differences to easy vary with the seed (so every CI has a width)."""
    if policy == "easy":
        return {"wait/mean": 100.0 + 3.0 * seed, "bsld/mean": 5.0 + seed, "util": 0.7}
    return {"wait/mean": 90.0 + cap * seed + seed**2, "bsld/mean": 4.0 + seed * seed / cap, "util": 0.6 + seed / 100}


def params_of(policy: str, seed: int, cap: int | None = None) -> dict:
    """A run's params as the sweeps log them: the flattened config, options under ``policy.``."""
    common = {"experiment_name": "mine", "policy": policy, "workload.name": "synthetic", "workload.jobs": 6,
              "workload.arrival_rate": 1.0, "workload.seed": seed, "cluster.nodes": 8, "seed": seed}
    if policy == "easy":
        return {**common, "policy._target_": "sim.policies.backfill.SeedBackfill", "policy.window": "head",
                "policy.order": "fcfs", "policy.backfill_order": None}
    return {**common, "policy._target_": "mysched.capsjf.CapSjf", "policy.order": "sjf", "policy.max_overtakes": cap}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    s = Store(tmp_path_factory.mktemp("variants"))
    mine = s.experiment("mine")
    for seed in SEEDS:
        configs = [("easy", None), *(("capsjf", cap) for cap in CAPS)]
        for policy, cap in configs:
            key = f"{policy}-{cap}-{seed}"
            s.log(mine, params_of(policy, seed, cap), metrics_of(policy, seed, cap),
                  tags={"schedlab.run_key": key, "schedlab.code": "c0de"}, jobs=jobs_table(policy, seed))
    orders = s.experiment("orders")  # every policy at every queue order, fixed attributes per policy
    for seed in SEEDS:
        for policy in ("easy", "conservative"):
            for order in ("fcfs", "sjf"):
                params = {"policy": policy, "policy.order": order, "seed": seed,
                          "policy.reservations": "1" if policy == "easy" else "all"}
                wait = 100.0 + seed * (2 if order == "sjf" else 1) + (seed**2 if policy == "conservative" else 0)
                s.log(orders, params, {"wait/mean": wait})
    mixed = s.experiment("mixed")  # README's sweep: the researcher's firstfit beside three built-in policies
    for seed in range(2):
        for policy in ("firstfit", "easy_sjf", "easy", "conservative"):
            target = "mysched.firstfit.FirstFit" if policy == "firstfit" else "sim.policies.backfill.SeedBackfill"
            s.log(mixed, {"policy": policy, "policy._target_": target, "seed": seed}, {"wait/mean": 10.0 + seed})
    return s


def expected(cap: int, metric: str) -> tuple[float, float]:
    """Mean and 95% half-width of capsjf(cap) − easy over the seeds, from the numbers logged."""
    diffs = pd.Series([metrics_of("capsjf", s, cap)[metric] - metrics_of("easy", s)[metric] for s in SEEDS])
    return diffs.mean(), float(t_half_width(diffs.std(), len(diffs)))


def test_each_variant_is_paired_with_the_baseline(store: Store) -> None:
    a = analyse(load_runs("mine", store.uri), metrics=METRICS, baseline="easy")
    assert a.rows == [] and a.levels == ["easy", *VARIANTS] and a.baseline == "easy"
    paired = a.paired.set_index(["column", "metric"])
    assert sorted(paired.index) == sorted((v, m) for v in VARIANTS for m in METRICS)
    for cap, variant in zip(CAPS, VARIANTS, strict=True):
        for metric in METRICS:
            mean, half = expected(cap, metric)
            assert paired.loc[(variant, metric), "n"] == len(SEEDS)
            assert paired.loc[(variant, metric), "mean"] == pytest.approx(mean)
            assert paired.loc[(variant, metric), "half_width"] == pytest.approx(half)
    table = to_markdown(a.paired_cells(), a.rows).splitlines()
    assert table[0].count("capsjf max_overtakes=2 − easy") == 2 and "—" not in "".join(table)
    assert len(table) == 3 and table[2].startswith("| all runs ")
    text = terminal_text(a)
    assert "easy-—" not in text and "(n=5)" in table[2]
    assert "policy level 'capsjf' holds 2 different configurations (policy.max_overtakes): shown apart" in text


def test_naming_the_option_as_a_column_gives_the_same_variants(store: Store) -> None:
    runs = load_runs("mine", store.uri)
    plain = analyse(runs, metrics=METRICS, baseline="easy")
    named = analyse(runs, cols=["policy", "max_overtakes"], metrics=METRICS, baseline="easy")
    assert named.cols == ["policy"] and named.levels == plain.levels
    pd.testing.assert_frame_equal(named.paired, plain.paired)


def test_a_policy_with_variants_must_be_named_in_full(store: Store) -> None:
    runs = load_runs("mine", store.uri)
    with pytest.raises(AnalysisError, match=re.escape(
            "ambiguous baseline 'capsjf': policy levels capsjf max_overtakes=2, capsjf max_overtakes=5; "
            "name one in full, e.g. --baseline 'capsjf max_overtakes=2'")):
        analyse(runs, metrics=METRICS, baseline="capsjf")
    a = analyse(runs, metrics=METRICS, baseline="capsjf max_overtakes=5")
    assert a.levels == ["capsjf max_overtakes=5", "capsjf max_overtakes=2", "easy"]
    with pytest.raises(AnalysisError, match="unknown baseline 'easy-—'; policy levels: capsjf max_overtakes=2, "):
        analyse(runs, metrics=METRICS, baseline="easy-—")


def test_the_option_as_an_explicit_row_says_why_nothing_pairs(store: Store) -> None:
    a = analyse(load_runs("mine", store.uri), rows=["max_overtakes"], metrics=METRICS, baseline="easy")
    assert a.paired["n"].eq(0).all()
    assert ("row policy.max_overtakes is an option of policy that not every policy ran at every value of: runs "
            "pair only within one value; without it in --rows each variant is its own column, paired with easy"
            ) in a.notes


def test_an_option_every_policy_ran_stays_a_row(store: Store) -> None:
    """The report of a crossed design (queue orders × policies) is as before: order is the row, each
    policy a column, pairs matched within each order."""
    a = analyse(load_runs("orders", store.uri), metrics=["wait/mean"], baseline="easy")
    assert a.rows == ["policy.order"] and a.levels == ["easy", "conservative"]
    assert not [n for n in a.notes if "configurations" in n or "option" in n]
    paired = a.paired.set_index("policy.order")
    assert paired.loc["fcfs", "mean"] == pytest.approx(sum(s**2 for s in SEEDS) / len(SEEDS))
    assert paired["n"].tolist() == [len(SEEDS)] * 2
    table = to_markdown(a.paired_cells(), a.rows).splitlines()
    assert table[0] == "| policy.order | wait/mean (s): conservative − easy |"
    assert [row.split("|")[1].strip() for row in table[2:]] == ["fcfs", "sjf"]


def test_the_default_schedule_run_is_the_studied_policys(store: Store, tmp_path: Path, capsys) -> None:
    runs = load_runs("mine", store.uri)
    a = analyse(runs, metrics=METRICS, baseline="easy")
    run = example_run(a)
    assert runs.params.loc[run, "policy"] == "capsjf" and runs.params.loc[run, "policy.max_overtakes"] == 2
    assert runs.params.loc[run, "seed"] == 0
    out = tmp_path / "rep"
    code = main(["--experiment", "mine", "--tracking-uri", store.uri, "--baseline", "easy", "--metrics",
                 ",".join(METRICS), "--out", str(out), "--gantt-jobs", "6", "--ecdf-runs", "2"])
    assert code == 0, capsys.readouterr().err
    report = (out / "report.md").read_text()
    assert f"### Schedule of run {run[:8]}" in report
    assert "policy=capsjf max_overtakes=2, seed=0; its first 6 jobs" in report
    assert "## Paired comparison with `easy`" in report and "easy-—" not in report
    assert (out / "figures" / f"gantt_{run[:8]}.png").stat().st_size > 1000


def test_the_studied_policy_is_the_researchers_own_class(store: Store) -> None:
    runs = load_runs("mixed", store.uri)
    a = analyse(runs, metrics=["wait/mean"], baseline="easy")
    assert a.levels == ["easy", "conservative", "easy_sjf", "firstfit"] and studied_level(a) == "firstfit"
    assert runs.params.loc[example_run(a), ["policy", "seed"]].tolist() == ["firstfit", 0]
    builtin = analyse(runs, metrics=["wait/mean"], baseline="firstfit")  # no other class of the researcher's
    assert studied_level(builtin) == "conservative"
