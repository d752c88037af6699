"""analysis/selection.py follows the declared protocol of docs/paper/selection.md: what is held out,
how the scale is fitted, the loss, the paired bootstrap and the decision rule, and that writing the
Results never touches the protocol."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import AnalysisError
from analysis.selection import (
    STUDIES,
    HeldOut,
    P,
    T,
    acceptance,
    commands,
    decision,
    fit,
    held_out_cells,
    held_out_loss,
    held_out_row,
    invented,
    next_runs,
    pd_ed_differ,
    published,
    write,
)
from tests.conftest import REPO

LIGO = STUDIES[0]
CONF, PUBLISHED = REPO / "conf" / "experiment", REPO / "docs" / "paper" / "published"


@pytest.mark.parametrize("study", STUDIES, ids=lambda s: s.name)
def test_every_other_published_point_is_held_out_once(study: object) -> None:
    paper = published(study, CONF, PUBLISHED)  # type: ignore[arg-type]
    cells, _ = held_out_cells(study, runs([]), paper, "subdeadline/align/forced", 50.0, [0])  # type: ignore[arg-type]
    # 8 points (λ low and default, s_max ×2, em_max ×2, m ×2) × PD, ED × P, T; the fit point is spent on the fit
    assert len(cells) == 32 and cells.groupby(["point", "lax", "metric"]).size().max() == 1
    assert cells["point"].nunique() == 8 and study.point(**study.fit) not in set(cells["point"])  # type: ignore[attr-defined]
    default = cells[cells["point"] == study.point()]  # type: ignore[attr-defined]
    assert len(default) == 4  # the default point of the four tables, once


def test_the_held_out_values_are_the_papers() -> None:
    paper = published(LIGO, CONF, PUBLISHED)
    at = paper.set_index(["point", "lax", "metric"])["paper"]
    assert at[(LIGO.point(**{"cluster.m": 40}), "ed", T)] == 3218.0
    assert at[(LIGO.point(**LIGO.fit), "pd", P)] == pytest.approx(0.0103)


def runs(rows: list[tuple[str, float, tuple[str, ...], str, int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["reading", "size", "point", "lax", "seed", P, T]).assign(code="c")


def test_the_fitted_size_has_the_lowest_joint_loss_ties_to_the_smaller() -> None:
    paper = published(LIGO, CONF, PUBLISHED)  # fit point: P 1.03 %, T 2005 s
    at = LIGO.point(**LIGO.fit)
    frame = runs([("a", 50, at, "pd", 0, 0.0103, 1800.0), ("a", 52, at, "pd", 0, 0.0103, 2005.0),
                  ("a", 54, at, "pd", 0, 0.05, 2005.0),  # P five times the paper's: J = ½ (3.85/0.5)
                  ("b", 51, at, "pd", 0, 0.0103, 2005.0), ("b", 53, at, "pd", 0, 0.0103, 2005.0),
                  ("b", 50, LIGO.point(), "pd", 0, 0.0103, 2005.0)])  # not the fit point: ignored
    table = fit(LIGO, frame, paper).set_index(["reading", "size"])
    assert table.loc[("a", 52), "J"] == pytest.approx(0.0) and table.loc[("a", 54), "J"] == pytest.approx(3.854, 1e-3)
    assert table.loc[("a", 50), "J"] == pytest.approx(0.5 * (205 / 2005) / 0.05)
    assert table.index[table["best"]].tolist() == [("a", 52), ("b", 51)]


def test_a_size_the_protocol_does_not_search_is_never_size_star() -> None:
    """A stray size in the store (an exploration, say) fits perfectly here, but size* is a grid or refinement size."""
    paper = published(LIGO, CONF, PUBLISHED)
    at = LIGO.point(**LIGO.fit)
    rows = [("a", s, at, "pd", 0, 0.0103, 2010.0 + 10 * abs(s - 53)) for s in (*LIGO.grid, 53.25)]
    table = fit(LIGO, runs([*rows, ("a", 53.1, at, "pd", 0, 0.0103, 2005.0)]), paper).set_index(["reading", "size"])
    assert table.loc[("a", 53.1), "J"] < table.loc[("a", 53.0), "J"]
    assert table.index[table["best"]].tolist() == [("a", 53.0)]
    table = fit(LIGO, runs([r for r in rows if r[1] != 53.0]), paper).set_index(["reading", "size"])
    assert table.index[table["best"]].tolist() == [("a", 52.0)]  # 53.25 refines 53, which is not run: not searched


def test_a_size_star_at_the_end_of_the_searched_sizes_is_marked_edge() -> None:
    """A loss still falling at the smallest size § 3 searches (49, the refinement below the coarse 50) gives a
    size* that bounds the fit; an interior minimum does not, nor does a coarse best whose refinement is unrun."""
    paper = published(LIGO, CONF, PUBLISHED)
    at = LIGO.point(**LIGO.fit)
    falling = [("a", s, at, "pd", 0, 0.0103, 2005.0 + 20 * (s - 48)) for s in (*LIGO.grid, *LIGO.refinement(50.0))]
    inside = [("b", s, at, "pd", 0, 0.0103, 2010.0 + 10 * abs(s - 53)) for s in (*LIGO.grid, *LIGO.refinement(53.0))]
    pending = [("c", s, at, "pd", 0, 0.0103, 2005.0 + 20 * (s - 48)) for s in LIGO.grid]
    table = fit(LIGO, runs([*falling, *inside, *pending]), paper).set_index(["reading", "size"])
    assert table.index[table["best"]].tolist() == [("a", 49.0), ("b", 53.0), ("c", 50.0)]
    assert table.index[table["edge"]].tolist() == [("a", 49.0)]


def test_deadline_readings_reuse_pd_runs_for_ed_cells() -> None:
    paper = published(LIGO, CONF, PUBLISHED)
    frame = runs([("deadline/align/forced", 50, LIGO.point(), "pd", 0, 0.001, 1400.0)])
    cells, grid = held_out_cells(LIGO, frame, paper, "deadline/align/forced", 50, [0])
    default = (cells["point"] == LIGO.point()).to_numpy()
    assert np.isfinite(grid[default]).all() and set(cells.loc[default, "lax"]) == {"pd", "ed"}
    cells, grid = held_out_cells(LIGO, frame.assign(reading="subdeadline/align/forced"), paper,
                                 "subdeadline/align/forced", 50, [0])
    assert np.isfinite(grid).sum() == 2  # PD's P and T only: ED was not run


def perfect(study: object, noise: float, bias: float = 0.0) -> HeldOut:
    """A held-out result of 4 seeds scattering around the paper's values × (1 + ``bias``) by a relative
    ±``noise`` (× 1, 2 or 3, by cell)."""
    paper = published(study, CONF, PUBLISHED)  # type: ignore[arg-type]
    cells, _ = held_out_cells(study, runs([]), paper, "r", 50.0, [0])  # type: ignore[arg-type]
    swing = noise * np.array([1.0, -1.0, 1.0, -1.0])[None, :] * (1 + np.arange(len(cells)) % 3)[:, None]
    return HeldOut(50.0, cells, cells["paper"].to_numpy()[:, None] * (1 + bias + swing))


def test_within_noise_the_reading_with_fewer_invented_rules_wins() -> None:
    good = {s.name: perfect(s, 0.02) for s in STUDIES}
    close = {s.name: perfect(s, 0.02, bias=0.002) for s in STUDIES}  # off by far less than the seeds' scatter
    assert invented("subdeadline/align/forced") == 2 and invented("subdeadline/none/planned") == 0
    assert invented("deadline/align/forced") == 0  # multi_parent acts on nothing under the deadline trigger
    lines = "\n".join(decision({"subdeadline/align/forced": good, "subdeadline/none/forced": close}, [0, 1, 2, 3]))
    assert "Lowest combined J: subdeadline/align/forced" in lines
    assert "Fewest invented rules among those: subdeadline/none/forced." in lines


def test_outside_noise_the_lower_error_wins_whatever_its_rules() -> None:
    bad = {s.name: HeldOut(50.0, h.cells, h.grid * 1.5) for s in STUDIES for h in [perfect(s, 0.001)]}
    good = {s.name: perfect(s, 0.001) for s in STUDIES}
    lines = "\n".join(decision({"subdeadline/align/forced": good, "subdeadline/none/forced": bad}, [0, 1, 2, 3]))
    assert "Fewest invented rules among those: subdeadline/align/forced." in lines
    assert "| subdeadline/none/forced | 0 |" in lines and lines.count("| no |") == 1


def test_no_decision_until_every_held_out_run_is_in() -> None:
    partial = {s.name: perfect(s, 0.0) for s in STUDIES}
    partial["genome"].grid[0, 0] = np.nan
    assert "Not yet" in "\n".join(decision({"subdeadline/align/forced": partial}, [0, 1, 2, 3]))


def test_a_held_out_row_scores_only_values_run_on_every_seed() -> None:
    """A value run on some seeds only (an interrupted sweep) is counted apart, and no J_held is given until every
    value has every seed; the medians are over every value with a run."""
    h = perfect(LIGO, 0.0, bias=0.5)  # every value off by 50 %: e_P = e_T = 0.5, J = ½ (0.5/0.5 + 0.5/0.05)
    assert held_out_row("r", h).endswith("| 32 of 32 | 0.50 | 0.500 | 5.50 | [5.50, 5.50] |")
    h.grid[0, 1:] = np.nan  # the first value on one seed of four
    h.grid[1, :] = np.nan  # the second on none
    assert held_out_row("r", h) == "| r | 50 | 30 of 32 (+1 in part) | 0.50 | 0.500 | — | — |"


def test_held_out_loss_is_the_median_rule() -> None:
    cells = pd.DataFrame({"metric": [P, P, P, T, T, T], "paper": [0.01, 0.01, 0.01, 100.0, 100.0, 100.0]})
    ours = np.array([0.01, 0.015, 1.0, 100.0, 110.0, 500.0])  # medians: e_P 0.5, e_T 0.1
    assert float(held_out_loss(cells, ours)) == pytest.approx(0.5 * (1 + 2))


def test_writing_results_keeps_the_protocol_byte_for_byte(tmp_path: Path) -> None:
    protocol = (REPO / "docs" / "paper" / "selection.md").read_text()
    head = protocol[:protocol.index("## Results\n") + len("## Results\n")]
    path = tmp_path / "selection.md"
    path.write_text(protocol + "old results\n")
    write(path, "new results\n")
    write(path, "newer results\n")
    assert path.read_text() == head + "\nnewer results\n"
    path.write_text("no heading\n")
    with pytest.raises(AnalysisError, match="no '## Results' heading"):
        write(path, "x")


def test_the_printed_commands_name_real_experiments_and_the_readings_runs() -> None:
    lines = [*commands(LIGO, "deadline/align/planned", "51.25,51.5", "sqlite:////s/mlflow.db", fit=True),
             *commands(LIGO, "deadline/align/planned", "52.25", "sqlite:////s/mlflow.db", fit=False)]
    assert len(lines) == 5 and "experiment=selection_fit_ligo" in lines[0] and "workload.size=51.25,51.5" in lines[0]
    for line in lines:
        name = line.split("experiment=")[1].split()[0]
        assert (CONF / f"{name}.yaml").exists(), name
        assert "policy.remap_trigger=deadline policy.multi_parent=align policy.late_rule=planned" in line
    assert all("workload.size=52.25 policy.laxity_distribution=pd" in line for line in lines[1:])
    assert "laxity_distribution" not in "".join(commands(LIGO, "subdeadline/none/forced", "50", "u", fit=False))


@pytest.mark.parametrize("study", STUDIES, ids=lambda s: s.name)
def test_the_coarse_grid_is_the_experiment_files(study: object) -> None:
    import yaml

    raw = yaml.safe_load((CONF / f"selection_fit_{study.name}.yaml").read_text())  # type: ignore[attr-defined]
    grid = [float(s) for s in str(raw["hydra"]["sweeper"]["params"]["workload.size"]).split(",")]
    assert grid == [float(s) for s in study.grid]  # type: ignore[attr-defined]


def test_runs_come_in_the_protocols_order() -> None:
    at = LIGO.point(**LIGO.fit)
    rows = [("subdeadline/none/forced", s, at, "pd", seed, 0.0103 + 0.001 * abs(s - 53), 2005.0 + 50 * abs(s - 53.5))
            for s in LIGO.grid for seed in range(10)]
    paper = published(LIGO, CONF, PUBLISHED)
    fitted = fit(LIGO, runs(rows[:-1]), paper)  # size 58 lacks seed 9
    [line] = next_runs(LIGO, fitted, "subdeadline/none/forced", False, "u")
    assert "selection_fit_ligo" in line and line.endswith("workload.size=58")
    fitted = fit(LIGO, runs(rows), paper)  # coarse grid done, best 53: refine 52–54 by 0.25 (52, 54 are run)
    [line] = next_runs(LIGO, fitted, "subdeadline/none/forced", False, "u")
    assert line.endswith("workload.size=52.25,52.5,52.75,53.25,53.5,53.75")
    rows += [("subdeadline/none/forced", s, at, "pd", seed, 0.0103, 2005.0 + 10 * abs(s - 53.5))
             for s in (52.25, 52.5, 52.75, 53.25, 53.5, 53.75) for seed in range(10)]
    lines = next_runs(LIGO, fit(LIGO, runs(rows), paper), "subdeadline/none/forced", False, "u")
    assert len(lines) == 4 and all("workload.size=53.5" in line for line in lines)  # held-out at size*
    assert next_runs(LIGO, fit(LIGO, runs(rows), paper), "subdeadline/none/forced", True, "u") == []
    assert "selection_fit_ligo" in next_runs(LIGO, fitted, "deadline/align/forced", False, "u")[0]  # not begun


def run_records(**changes: object) -> pd.DataFrame:
    """Two finished runs of the LIGO study as MLflow lists them (seeds 0 and 1), ``changes`` to the second."""
    base = {"params.policy.remap_trigger": "subdeadline", "params.policy.multi_parent": "align",
            "params.policy.late_rule": "forced", "params.workload.size": "50", "params.policy.tsp": "tsp1",
            "params.policy.laxity": "sl", "params.policy.laxity_distribution": "pd", "params.workload.jobs": "2000",
            "params.workload.arrival_rate": str(1 / 150), "params.workload.s_max": "50000",
            "params.workload.em_max": "5.0", "params.cluster.m": "50", "metrics.late/proportion": 0.03,
            "metrics.turnaround/mean": 1600.0, "tags.schedlab.code": "c1"}
    return pd.DataFrame([{**base, "params.seed": "0"}, {**base, "params.seed": "1", **changes}],
                        index=pd.Index(["r0", "r1"], name="run_id"))


@pytest.mark.parametrize(("changes", "message"), [
    ({"params.workload.jobs": "500"}, r"runs differ in workload\.jobs \(2000, 500\), which the study holds fixed"),
    ({"tags.schedlab.code": "c2"}, r"runs from 2 simulator-code fingerprints \(c1, c2\); --pool-code pools them"),
    ({"params.seed": "12"}, r"runs of seed\(s\) 12, but the protocol's seeds are 0–9"),
])
def test_runs_that_would_pool_silently_are_refused(monkeypatch: pytest.MonkeyPatch, changes: dict,
                                                   message: str) -> None:
    import analysis.selection as selection
    from analysis.runs import RunSet

    monkeypatch.setattr(selection, "load_runs", lambda experiment, uri: RunSet.from_records(
        experiment, uri, run_records(**changes)))
    with pytest.raises(AnalysisError, match=message):
        selection.runs_frame(LIGO, "sqlite:///x")
    if "tags.schedlab.code" in changes:
        assert len(selection.runs_frame(LIGO, "sqlite:///x", pool_code=True)) == 2


def test_the_study_runs_become_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    import analysis.selection as selection
    from analysis.runs import RunSet

    monkeypatch.setattr(selection, "load_runs", lambda experiment, uri: RunSet.from_records(
        experiment, uri, run_records()))
    frame = selection.runs_frame(LIGO, "sqlite:///x")
    assert frame["reading"].tolist() == ["subdeadline/align/forced"] * 2 and frame["seed"].tolist() == [0, 1]
    assert set(frame["point"]) == {LIGO.point(**LIGO.fit)} and frame["size"].tolist() == [50.0, 50.0]


def test_the_studys_runs_read_back_from_its_export_are_the_stores(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """selection.md's results outlive the store: ``--export-runs`` keeps the runs, ``--runs`` reads them back."""
    import analysis.selection as selection
    from analysis.export import RunExport
    from analysis.runs import RunSet

    def load_runs(experiment: str, uri: str) -> RunSet:  # the store has LIGO's runs alone
        if experiment != LIGO.experiment:
            raise AnalysisError(f"unknown experiment {experiment!r} in {uri}; experiments: {LIGO.experiment}")
        return RunSet.from_records(experiment, uri, run_records())

    monkeypatch.setattr(selection, "load_runs", load_runs)
    assert selection.export_study("sqlite:///x", tmp_path / "runs.parquet") == 2
    export = RunExport.read(tmp_path / "runs.parquet")
    pd.testing.assert_frame_equal(selection.runs_frame(LIGO, "sqlite:///x", export=export),
                                  selection.runs_frame(LIGO, "sqlite:///x"))


def test_only_every_candidate_on_ten_seeds_makes_the_decision() -> None:
    from analysis.selection import CANDIDATES

    every = {r: {s.name: perfect(s, 0.02, bias=0.01 * i) for s in STUDIES} for i, r in enumerate(CANDIDATES)}
    assert "Provisional ranking" in "\n".join(decision(every, [0, 1, 2, 3]))  # 4 seeds of 10
    ten = {r: {s.name: HeldOut(50.0, h.cells, np.tile(h.grid, (1, 3))[:, :10]) for s, h in
               ((s, parts[s.name]) for s in STUDIES)} for r, parts in every.items()}
    text = "\n".join(decision(ten, list(range(10))))
    assert text.startswith("### Decision (§ 5)") and "Lowest combined J: subdeadline/align/forced" in text
    assert "**Chosen: subdeadline/none/forced**, at ligo workload.size = 50, genome workload.size = 50" in text
    partial = dict(list(ten.items())[:-1])
    assert "missing: deadline/align/planned" in "\n".join(decision(partial, list(range(10))))
    assert "Chosen" not in "\n".join(decision(partial, list(range(10))))  # a provisional ranking chooses nothing


def test_a_tie_keeps_the_declared_default_of_the_tied_factor_and_names_the_chosen_sizes() -> None:
    """§ 5: two readings with identical runs (the late rule under the deadline trigger) tie; the late rule keeps
    its default at the protocol's declaration (forced), and the chosen reading's size* is each workload's scale."""
    from analysis.selection import CANDIDATES

    def result(bias: float, sizes: tuple[float, float]) -> dict[str, HeldOut]:
        return {s.name: HeldOut(size, h.cells, np.tile(h.grid, (1, 3))[:, :10])
                for s, size in zip(STUDIES, sizes, strict=True) for h in [perfect(s, 0.02, bias=bias)]}

    every = {r: result(0.3, (49.0, 63.0)) for r in CANDIDATES}
    tied = result(0.0, (56.25, 80.0))
    every["deadline/align/forced"] = every["deadline/align/planned"] = tied
    text = "\n".join(decision(every, list(range(10))))
    assert "Fewest invented rules among those: deadline/align/planned, deadline/align/forced — a tie" in text \
        or "Fewest invented rules among those: deadline/align/forced, deadline/align/planned — a tie" in text
    assert "**Chosen: deadline/align/forced**, at ligo workload.size = 56.25, genome workload.size = 80" in text


def test_the_papers_pd_ed_pattern_is_counted() -> None:
    counts = [pd_ed_differ(published(s, CONF, PUBLISHED)) for s in STUDIES]
    assert counts == [(5, 9), (2, 9)]  # LIGO: λ 1/150, s_max 2.5·10⁵, em_max 2 and 10, m 40; Genome: λ 1/1800, m 40


def test_fit_point_means_carry_student_t_intervals() -> None:
    at = LIGO.point(**LIGO.fit)
    frame = runs([("a", 50, at, "pd", 0, 0.01, 1900.0), ("a", 50, at, "pd", 1, 0.02, 2100.0),
                  ("a", 52, at, "pd", 0, 0.01, 2000.0)])
    table = fit(LIGO, frame, published(LIGO, CONF, PUBLISHED)).set_index("size")
    assert table.loc[50, "P_hw"] == pytest.approx(0.00707107 * 12.7062 / 2 ** 0.5, rel=1e-4)  # sd · t(0.975, 1) / √2
    assert table.loc[50, "T_hw"] == pytest.approx(141.421 * 12.7062 / 2 ** 0.5, rel=1e-4)
    assert np.isnan(table.loc[52, "P_hw"])  # one seed: no interval


def test_the_acceptance_numbers_count_the_default_point_once_per_table() -> None:
    """Issue 38's done-when: the median over the four tables' published cells — the default point in each."""
    every = published(LIGO, CONF, PUBLISHED, per_table=True)
    assert len(every) == 48 and (every["point"] == LIGO.point()).sum() == 16  # 4 tables × PD, ED × P, T
    values = every.drop_duplicates(["point", "lax"]).set_index(["point", "lax", "metric"])["paper"]
    paper = published(LIGO, CONF, PUBLISHED).set_index(["point", "lax", "metric"])["paper"]
    rows = [("r", 52.0, point, lax, 0, paper[(point, lax, P)] * (1.5 if point == LIGO.point() else 1.0),
             paper[(point, lax, T)]) for point, lax, _ in values.index]
    e_p, e_t, run = acceptance(every, runs(rows), "r", 52.0)
    assert (e_p, e_t, run) == (0.0, 0.0, 24)  # 8 of 24 P cells off by half: the median is the 16 exact ones
    e_p, _, run = acceptance(every, runs([r for r in rows if r[2] == LIGO.point()]), "r", 52.0)
    assert (e_p, run) == (pytest.approx(0.5), 8)
    assert acceptance(every, runs(rows), "r", 53.0)[2] == 0  # another size: none of these runs


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), study=st.sampled_from(STUDIES))
def test_the_plan_walks_the_protocol_on_any_loss_landscape(seed: int, study: object) -> None:
    """Property (§ 3–4): whatever the fit-point losses, the plan asks for the coarse grid, then the refinement
    around the best coarse size, then the held-out points at the lowest-J size among those — never another size."""
    paper = published(study, CONF, PUBLISHED)  # type: ignore[arg-type]
    at = study.point(**study.fit)  # type: ignore[attr-defined]
    ref = paper[(paper["point"] == at) & (paper["lax"] == "pd")].set_index("metric")["paper"]
    reading = "subdeadline/none/forced"

    def cell(size: float) -> list[tuple]:  # a random but fixed fit-point result for each size, ten seeds
        u, v = np.random.default_rng([seed, int(size * 4)]).uniform(0.2, 1.8, 2)
        return [(reading, size, at, "pd", s, ref[P] * u, ref[T] * v) for s in range(10)]

    rows: list[tuple] = []
    asked: list[list[float]] = []
    for _ in range(3):
        lines = next_runs(study, fit(study, runs(rows), paper), reading, False, "u")  # type: ignore[arg-type]
        sizes = [float(x) for x in lines[0].rsplit("workload.size=", 1)[1].split(",")]
        if "selection_fit_" not in lines[0]:
            break
        asked.append(sizes)
        rows += [r for size in sizes for r in cell(size)]
    table = fit(study, runs(rows), paper)  # type: ignore[arg-type]
    coarse = table[table["size"].isin(study.grid)]  # type: ignore[attr-defined]
    centre = float(coarse.sort_values(["J", "size"])["size"].iloc[0])
    assert asked[0] == [float(s) for s in study.grid]  # type: ignore[attr-defined]
    refine = [s for s in study.refinement(centre) if s not in study.grid]  # type: ignore[attr-defined]
    assert asked[1:] == [refine]
    searched = table[table["size"].isin([*study.grid, *study.refinement(centre)])]  # type: ignore[attr-defined]
    best = float(searched.sort_values(["J", "size"])["size"].iloc[0])
    assert len(lines) == 4 and all(line.endswith(f"workload.size={best:g}") for line in lines)


def test_the_committed_results_are_the_committed_runs(tmp_path: Path) -> None:
    """selection.md's Results are what analysis/selection.py computes from docs/paper/selection_runs.parquet,
    as its 'Generated by' line says: numbers and runs committed together, neither edited by hand."""
    import re

    from analysis.selection import main

    committed = REPO / "docs" / "paper" / "selection.md"
    text = committed.read_text()
    generated = re.search(r"Generated by `python analysis/selection.py --tracking-uri (\S+) --runs (\S+)`", text)
    assert generated is not None and generated[2] == "docs/paper/selection_runs.parquet"
    copy = tmp_path / "selection.md"
    copy.write_text(text)
    assert main(["--tracking-uri", generated[1], "--runs", str(REPO / generated[2]), "--write", str(copy)]) == 0
    assert copy.read_text() == text
