"""The report's honesty rules: n per cell, no significance from n = 1 or identical replications,
and no silent pooling of runs produced by different simulator code (``schedlab.code``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import AnalysisError
from analysis.formatting import to_markdown
from analysis.report import main
from analysis.runs import load_runs
from analysis.summary import analyse, terminal_text
from tests.test_analysis import Store

UTIL = {"easy": 0.000103, "conservative": 0.000101}  # a trace replay: every seed gives the same result


def trace_params(policy: str, seed: int) -> dict:
    return {"policy": policy, "workload.name": "swf", "workload.path": "KTH.swf", "seed": seed}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    s = Store(tmp_path_factory.mktemp("honesty"))
    trace = s.experiment("trace")
    for policy, util in UTIL.items():
        for seed in range(5):
            s.log(trace, trace_params(policy, seed), {"util": util, "wait/mean": 100.0 if policy == "easy" else 90.0})
    single = s.experiment("single")
    for policy, util in UTIL.items():
        s.log(single, trace_params(policy, 0), {"util": util})
    code = s.experiment("code")
    for policy in UTIL:
        for seed in range(3):
            tags = {} if (policy, seed) == ("easy", 2) else {"schedlab.code": "a1b2c3d4e5f6a7b8"}
            s.log(code, trace_params(policy, seed), {"util": 0.5 + seed / 100}, tags=tags)
    return s


def test_identical_replications_are_never_significant(store: Store) -> None:
    a = analyse(load_runs("trace", store.uri), metrics=["util", "wait/mean"], baseline="easy")
    assert not a.paired["excludes_zero"].any()
    text = terminal_text(a)
    assert not [line for line in text.splitlines() if line.startswith("|") and " *" in line]
    assert "-0.000002 ± 0 (n=5)" in text and "-10 ± 0 (n=5)" in text and "0.000103 ± 0 (n=5)" in text
    assert ("note: 2 of 2 paired cells have no spread: 2 with zero variance over their pairs (identical results: "
            "does the workload depend on the seed?) — no significance claimed for them") in text
    assert "note: 4 of 4 CI table cells have no spread: 4 with zero variance over their replications" in text


def test_single_replication_is_never_significant_and_shows_n_1(store: Store) -> None:
    a = analyse(load_runs("single", store.uri), metrics=["util"], baseline="easy")
    assert not a.paired["excludes_zero"].any()
    assert "0.000103 ± — (n=1)" in to_markdown(a.ci_cells(), a.rows)
    assert "1 with n = 1" in terminal_text(a)


def test_mixed_code_fingerprints_are_refused_unless_pooling_is_asked(store: Store, tmp_path: Path, monkeypatch,
                                                                       capsys) -> None:
    runs = load_runs("code", store.uri)
    with pytest.raises(AnalysisError) as info:
        analyse(runs, metrics=["util"])
    assert str(info.value) == (
        "1 cell(s) mix runs of different simulator code, e.g. policy=easy (a1b2c3d4e5f6: 2 run(s), "
        "unknown: 1 run(s)); select one sweep with --sweep, rerun it, or pass --pool-code to pool them anyway")
    pooled = analyse(runs, metrics=["util"], pool_code=True)
    assert "1 cell(s) pool runs of different simulator code (schedlab.code), as asked" in pooled.notes
    monkeypatch.chdir(tmp_path)
    base = ["--experiment", "code", "--tracking-uri", store.uri, "--metrics", "util", "--table-only"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.startswith("report.py: error: 1 cell(s) mix runs") and err.count("\n") == 1
    assert main([*base, "--pool-code"]) == 0
    assert "(n=3)" in capsys.readouterr().out


def test_one_fingerprint_per_cell_is_fine(store: Store) -> None:
    a = analyse(load_runs("trace", store.uri), metrics=["util"])  # untagged runs: one "unknown" fingerprint
    assert not [n for n in a.notes if "simulator code" in n]
