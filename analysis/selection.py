"""Issue 38's model-selection study (``docs/paper/selection.md``, whose protocol this follows): each
candidate reading's fit-point error and fitted scale, its held-out error on every other published
point, a paired bootstrap over replications, and the decision rule; written below the protocol as
the file's Results section (the protocol above it is never touched).

Usage::

    python analysis/selection.py --tracking-uri sqlite:////work/stores/selection/mlflow.db    # print
    python analysis/selection.py --tracking-uri sqlite:////… --write docs/paper/selection.md
    python analysis/selection.py --tracking-uri sqlite:////… --export-runs docs/paper/selection_runs.parquet
    python analysis/selection.py --tracking-uri sqlite:////… --runs docs/paper/selection_runs.parquet  # the export
    python analysis/selection.py --tracking-uri sqlite:////… --next   # the sweeps still to make (make selection)

The export (:mod:`analysis.export`) keeps the study's runs as data in the repository, so its results outlive
the store; the store is what a resumed study skips finished runs by.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.stats import t as student_t

from analysis import AnalysisError
from analysis.export import RunExport, write_export
from analysis.formatting import format_pm
from analysis.paper_spec import level_key, read_table
from analysis.runs import load_runs

REPO = Path(__file__).resolve().parents[1]
P, T = "late/proportion", "turnaround/mean"
#: the issue's tolerance of each metric: a candidate at both scores J = 1 (selection.md § 3)
TOLERANCE = {P: 0.5, T: 0.05}
READING = ("policy.remap_trigger", "policy.multi_parent", "policy.late_rule")
POINT = ("workload.arrival_rate", "workload.s_max", "workload.em_max", "cluster.m")
#: invented rules per level (selection.md § 1); levels not listed add none
INVENTED = {"align": 2, "latest_start": 1}
#: the published columns: the paper's own configurations, PD-SL-TSP1 and ED-SL-TSP1
PAPER_CONFIGS = {"pd/tsp1": "pd", "ed/tsp1": "ed"}
RESULTS = "## Results\n"
#: the protocol's candidates (§ 1; deadline readings run with multi_parent=align, which acts on nothing there)
CANDIDATES = (*(f"subdeadline/{m}/{late}" for m in ("align", "latest_start", "none") for late in ("forced", "planned")),
              "deadline/align/forced", "deadline/align/planned")
REPLICATIONS = 10  # seeds 0–9 (§ 3, § 4)
#: the readings conf/ defaulted to when the protocol was declared (e3bcbca): § 5's tie-break keeps them
DECLARED_DEFAULTS = ("subdeadline", "align", "forced")
#: :func:`runs_frame`'s columns
RUN_COLUMNS = ["reading", "size", "point", "lax", "seed", P, T, "code"]
SWEEP = "nice -n 19 python sweeps/run.py -m"  # how the Results show a sweep still to make
BOOTSTRAP, BOOTSTRAP_SEED = 2000, 38


@dataclass(frozen=True)
class Study:
    """One workload's part of the study: its experiment, default and fit points, published tables."""

    name: str
    default: tuple[float, int, float, int]  # POINT values
    fit: dict[str, float]  # POINT keys that differ from the default at the fit point
    grid: tuple[float, ...]  # the coarse size grid (selection_fit_<name>.yaml's sweep)
    refine: tuple[float, float]  # the refinement's step and half-width around the best coarse size

    @property
    def experiment(self) -> str:
        return f"schedlab-selection-{self.name}"

    @property
    def tables(self) -> list[str]:
        return [f"{self.name}_{factor}" for factor in ("lambda", "smax", "emmax", "m")]

    def refinement(self, best: float) -> list[float]:
        """The refinement's sizes around the best coarse size ``best`` (§ 3; ``best`` itself is run already).

        >>> STUDIES[0].refinement(58.0)
        [57.0, 57.25, 57.5, 57.75, 58.25, 58.5, 58.75, 59.0]
        """
        step, width = self.refine
        return [float(best + k * step) for k in np.arange(-width / step, width / step + 1) if k and best + k * step > 0]

    def point(self, **changed: float) -> tuple[str, ...]:
        values = dict(zip(POINT, self.default, strict=True)) | changed
        return tuple(level_key(values[k]) for k in POINT)


STUDIES = (Study("ligo", (1 / 180, 50_000, 5.0, 50), {"workload.arrival_rate": 1 / 150},
                 tuple(range(50, 59)), (0.25, 1.0)),
           Study("genome", (1 / 2290, 50_000, 5.0, 50), {"workload.arrival_rate": 1 / 1800},
                 (47, 51, 55, 59, 63, 67, 71, 76, 81), (1.0, 4.0)))


def published(study: Study, conf_dir: Path, published_dir: Path, per_table: bool = False) -> pd.DataFrame:
    """The paper's P and T values of the study's tables, one line per (point, configuration, metric); with
    ``per_table``, one per table cell (the default point then appears once in each of the four tables)."""
    parts = []
    for table_id in study.tables:
        table = read_table(conf_dir / f"paper_{table_id}.yaml", published_dir)
        frame = table.published
        frame = frame[frame["config"].isin(PAPER_CONFIGS) & frame["metric"].isin(TOLERANCE)]
        assert table.rows in POINT, table.rows
        points = [study.point(**{table.rows: float(row)}) for row in frame["row"]]
        frame = frame.assign(point=points, lax=frame["config"].map(PAPER_CONFIGS), table=table_id)
        parts.append(frame[["table", "point", "lax", "metric", "mean"]])
    cells = pd.concat(parts, ignore_index=True).rename(columns={"mean": "paper"})
    return cells if per_table else distinct(cells)


def distinct(cells: pd.DataFrame) -> pd.DataFrame:
    """:func:`published`'s cells per table as one line per (point, configuration, metric)."""
    return cells.drop_duplicates(["point", "lax", "metric"]).drop(columns="table")


def pd_ed_differ(paper: pd.DataFrame) -> tuple[int, int]:
    """(points where the paper's PD and ED values differ in P or T, points): § 5's PD/ED pattern."""
    wide = paper.pivot_table(index=["point", "metric"], columns="lax", values="paper")
    return int(wide[wide["pd"] != wide["ed"]].reset_index()["point"].nunique()), int(paper["point"].nunique())


def runs_frame(study: Study, tracking_uri: str, pool_code: bool = False,
               export: RunExport | None = None) -> pd.DataFrame:
    """One line per finished run of the study's experiment (from ``export`` if given, else the store): reading,
    size, point, PD/ED, seed, P, T, code."""
    runs = export.runs(study.experiment) if export else load_runs(study.experiment, tracking_uri)
    p = runs.params
    for key in (*READING, "workload.size", "policy.laxity_distribution", "policy.tsp", "policy.laxity", *POINT):
        if key not in p:
            raise AnalysisError(f"{study.experiment}: runs without {key} (not a selection_* experiment?)")
    keep = (p["policy.tsp"] == "tsp1") & (p["policy.laxity"] == "sl")
    free = {*READING, "workload.size", *POINT, "policy.laxity_distribution", "seed"}
    for key in sorted(set(p.columns) - free):  # anything else would be pooled into a cell without a word
        if p.loc[keep, key].nunique(dropna=False) > 1:
            values = ", ".join(map(str, p[key].unique()[:4]))
            raise AnalysisError(f"{study.experiment}: runs differ in {key} ({values}), which the study holds fixed "
                                "(selection.md § 1): keep such runs in another store")
    seeds = sorted(set(p.loc[keep, "seed"].astype(int)) - set(range(REPLICATIONS)))
    if seeds:
        raise AnalysisError(f"{study.experiment}: runs of seed(s) {', '.join(map(str, seeds[:4]))}, but the protocol's "
                            f"seeds are 0–{REPLICATIONS - 1} (selection.md §§ 3–4): keep such runs in another store")
    codes = runs.code_fingerprints()[keep]
    if codes.nunique() > 1 and not pool_code:
        raise AnalysisError(f"{study.experiment}: runs from {codes.nunique()} simulator-code fingerprints "
                            f"({', '.join(sorted(codes.unique()))}); --pool-code pools them")
    return pd.DataFrame({
        "reading": p[list(READING)].astype(str).agg("/".join, axis=1),
        "size": p["workload.size"].astype(float),
        "point": [tuple(level_key(v) for v in row) for row in p[list(POINT)].itertuples(index=False)],
        "lax": p["policy.laxity_distribution"], "seed": p["seed"].astype(int),
        P: runs.metrics[P], T: runs.metrics[T], "code": runs.code_fingerprints(),
    })[keep]


def loss(ours_p: np.ndarray, paper_p: np.ndarray, ours_t: np.ndarray, paper_t: np.ndarray) -> np.ndarray:
    """J = ½ (median e_P / 0.5 + median e_T / 0.05) over the last axis (one value: the fit-point J).

    >>> round(float(loss(np.array([0.015]), np.array([0.01]), np.array([105.0]), np.array([100.0]))), 9)
    1.0
    """
    e_p = np.median(np.abs(ours_p - paper_p) / paper_p, axis=-1)
    e_t = np.median(np.abs(ours_t - paper_t) / paper_t, axis=-1)
    return 0.5 * (e_p / TOLERANCE[P] + e_t / TOLERANCE[T])


def fit(study: Study, runs: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Fit-point means and J per reading and size; ``best`` marks each reading's size* (ties: smaller), ``edge`` a
    size* at the smallest or largest size § 3 searches for it: the lowest J may lie beyond, where it does not search."""
    at = runs[(runs["point"] == study.point(**study.fit)) & (runs["lax"] == "pd")]
    ref = paper[(paper["point"] == study.point(**study.fit)) & (paper["lax"] == "pd")].set_index("metric")["paper"]
    table = at.groupby(["reading", "size"]).agg(seeds=("seed", "nunique"), P=(P, "mean"), T=(T, "mean"),
                                                P_sd=(P, "std"), T_sd=(T, "std")).reset_index()
    t95 = student_t.ppf(0.975, np.maximum(table["seeds"] - 1, 1)) / np.sqrt(table["seeds"])
    table["P_hw"], table["T_hw"] = table.pop("P_sd") * t95, table.pop("T_sd") * t95  # NaN with one seed
    table["J"] = loss(table["P"].to_numpy()[:, None], ref[P], table["T"].to_numpy()[:, None], ref[T])
    table["best"] = table["edge"] = False
    for _, mine in table.groupby("reading"):
        if mine["size"].isin(study.grid).any():  # size* is a size the protocol searches: the grid and its refinement
            searched = {*study.grid, *study.refinement(best_coarse(study, mine))}
            star = mine[mine["size"].isin(searched)].sort_values(["J", "size"]).index[0]
            table.loc[star, "best"] = True
            table.loc[star, "edge"] = table.loc[star, "size"] in (min(searched), max(searched))
    return table


def best_coarse(study: Study, mine: pd.DataFrame) -> float:
    """The coarse-grid size of lowest fit-point J among one reading's rows of :func:`fit` (ties: the smaller),
    which the refinement is centred on (§ 3)."""
    return float(mine[mine["size"].isin(study.grid)].sort_values(["J", "size"])["size"].iloc[0])


def held_out_cells(study: Study, runs: pd.DataFrame, paper: pd.DataFrame, reading: str, size: float,
                   seeds: list[int]) -> tuple[pd.DataFrame, np.ndarray]:
    """The held-out published values of ``study`` (the fit point left out) and ours per seed (cells × seeds,
    NaN where a run is missing). Under the deadline trigger ED's cells are PD's runs (selection.md § 1)."""
    cells = paper[paper["point"] != study.point(**study.fit)].reset_index(drop=True)
    values = _cell_runs(runs, reading, size).groupby(["point", "lax", "seed"])[[P, T]].mean()
    grid = np.full((len(cells), len(seeds)), np.nan)
    for i, cell in cells.iterrows():
        for j, seed in enumerate(seeds):
            key = (cell["point"], cell["lax"], seed)
            if key in values.index:
                grid[i, j] = values.at[key, cell["metric"]]
    return cells, grid


def _cell_runs(runs: pd.DataFrame, reading: str, size: float) -> pd.DataFrame:
    """The runs of ``reading`` at ``size``; under the deadline trigger PD's runs stand for ED too (§ 1)."""
    mine = runs[(runs["reading"] == reading) & (runs["size"] == size)]
    if reading.startswith("deadline/"):
        mine = mine[mine["lax"] == "pd"]
        mine = pd.concat([mine, mine.assign(lax="ed")])
    return mine


def acceptance(cells: pd.DataFrame, runs: pd.DataFrame, reading: str, size: float) -> tuple[float, float, int]:
    """Issue 38's acceptance numbers for ``reading`` at ``size`` (§ 5, reported, not scored): median e_P and e_T
    over the published cells of the four tables as the issue counts them (``cells``: :func:`published` per table;
    the default point once per table, the fit point included), over the cells that have runs; and how many do."""
    means = _cell_runs(runs, reading, size).groupby(["point", "lax"])[[P, T]].mean()
    ours = np.array([means.at[(c.point, c.lax), c.metric] if (c.point, c.lax) in means.index else np.nan
                     for c in cells.itertuples()])
    err = np.abs(ours - cells["paper"].to_numpy()) / cells["paper"].to_numpy()
    is_p = (cells["metric"] == P).to_numpy()
    return _median(err[is_p]), _median(err[~is_p]), int(np.isfinite(ours[is_p]).sum())


def held_out_loss(cells: pd.DataFrame, ours: np.ndarray) -> np.ndarray:
    """J_held of cell means ``ours`` (…, cells): medians over the P cells and over the T cells."""
    is_p = (cells["metric"] == P).to_numpy()
    paper = cells["paper"].to_numpy()
    return loss(ours[..., is_p], paper[is_p], ours[..., ~is_p], paper[~is_p])


def invented(reading: str) -> int:
    """Invented rules of a reading (selection.md § 1); under the deadline trigger multi_parent acts on nothing.

    >>> invented("subdeadline/align/forced"), invented("deadline/align/forced"), invented("subdeadline/none/planned")
    (2, 0, 0)
    """
    trigger, multi_parent, late_rule = reading.split("/")
    return INVENTED.get(late_rule, 0) + (INVENTED.get(multi_parent, 0) if trigger == "subdeadline" else 0)


@dataclass
class HeldOut:
    """One reading's held-out result on one workload."""

    size: float
    cells: pd.DataFrame
    grid: np.ndarray  # cells × seeds

    @property
    def complete(self) -> bool:
        return not np.isnan(self.grid).any()

    def means(self) -> np.ndarray:
        """Each cell's mean over the seeds run (NaN for a cell without runs)."""
        run = np.isfinite(self.grid)
        total = np.where(run, self.grid, 0.0).sum(axis=1)
        count = run.sum(axis=1)
        return np.divide(total, count, out=np.full(len(total), np.nan), where=count > 0)

    def medians(self) -> tuple[float, float]:
        """Median e_P and e_T over the cells run (NaN when none is)."""
        means = self.means()
        err = np.abs(means - self.cells["paper"].to_numpy()) / self.cells["paper"].to_numpy()
        is_p = (self.cells["metric"] == P).to_numpy()
        return _median(err[is_p]), _median(err[~is_p])


def held_out_row(reading: str, h: HeldOut) -> str:
    """A reading's line of the held-out table: the values run on every seed (and how many in part), the medians
    over every value with a run, and J_held with its bootstrap interval once every value is run on every seed."""
    run = int(np.isfinite(h.grid).all(axis=1).sum())
    part = int(np.isfinite(h.grid).any(axis=1).sum()) - run
    e_p, e_t = h.medians()
    j, interval = "—", "—"
    if h.complete:
        lo, hi = np.percentile(resampled_loss(h, resample_weights(h.grid.shape[1])), [2.5, 97.5])
        j, interval = f"{float(held_out_loss(h.cells, h.means())):.2f}", f"[{lo:.2f}, {hi:.2f}]"
    runs = f"{run} of {len(h.cells)}" + (f" (+{part} in part)" if part else "")
    return f"| {reading} | {h.size:g} | {runs} | {_num(e_p, 2)} | {_num(e_t, 3)} | {j} | {interval} |"


def resample_weights(n_seeds: int) -> np.ndarray:
    """B × seeds counts of each seed in the B bootstrap resamples (the same for every reading: paired)."""
    picks = np.random.default_rng(BOOTSTRAP_SEED).integers(0, n_seeds, size=(BOOTSTRAP, n_seeds))
    return np.stack([np.bincount(row, minlength=n_seeds) for row in picks]).astype(float)


def resampled_loss(h: HeldOut, weights: np.ndarray) -> np.ndarray:
    """J_held of ``h`` under each resample (``weights``: B × seeds)."""
    return held_out_loss(h.cells, (weights @ h.grid.T) / weights.sum(axis=1, keepdims=True))


def bootstrap(results: dict[str, list[HeldOut]], seeds: list[int]) -> dict[str, np.ndarray]:
    """Combined held-out J of each complete reading under the same B resamples of ``seeds`` (paired)."""
    weights = resample_weights(len(seeds))
    return {reading: np.mean([resampled_loss(h, weights) for h in parts], axis=0) for reading, parts in results.items()}


def report(tracking_uri: str, conf_dir: Path, published_dir: Path, pool_code: bool = False,
           export: RunExport | None = None) -> tuple[str, list[str]]:
    """The Results section (Markdown) from the runs in ``tracking_uri`` (or in ``export``), and the sweeps the
    protocol needs next (each one sweep's overrides, :func:`next_runs`; none when the study is complete)."""
    flag = (" --pool-code" if pool_code else "") + (f" --runs {_shown(export.path)}" if export else "")
    lines = [f"Generated by `python analysis/selection.py --tracking-uri {tracking_uri}{flag}` from the runs of "
             f"{', '.join(f'`{s.experiment}`' for s in STUDIES)}.", ""]
    held: dict[str, dict[str, HeldOut]] = {}
    seeds: list[int] = []
    todo: list[str] = []
    for study in STUDIES:
        every = published(study, conf_dir, published_dir, per_table=True)  # each table's cells, read once
        paper = distinct(every)
        try:
            runs = runs_frame(study, tracking_uri, pool_code, export)
        except AnalysisError as error:
            if not _no_runs(error):
                raise
            lines += [f"### {study.name}", "", f"No runs: {error}", ""]
            none = fit(study, pd.DataFrame(columns=RUN_COLUMNS), paper)
            todo += [c for reading in CANDIDATES for c in next_runs(study, none, reading, False, tracking_uri)]
            continue
        seeds = sorted(set(seeds) | set(runs["seed"]))
        table = fit(study, runs, paper)
        lines += [f"### {study.name}: fit point {_point_text(study)}, PD-SL-TSP1", "",
                  f"{len(runs)} finished runs; simulator code {', '.join(sorted(runs['code'].unique()))}.", "",
                  "| reading (trigger/multi_parent/late_rule) | size | seeds | P (%) ± 95 % CI | T (s) ± 95 % CI "
                  "| J_fit | size* |", "|---|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r.reading} | {r.size:g} | {r.seeds} | {format_pm(100 * r.P, 100 * r.P_hw, r.seeds)} | "
                  f"{format_pm(r.T, r.T_hw, r.seeds)} | {r.J:.2f} | {'◀ edge' if r.edge else '◀' if r.best else ''} |"
                  for r in table.itertuples()]
        if table["edge"].any():
            lines += ["", "◀ edge: size* is the smallest or largest size § 3 searches, for "
                      f"{', '.join(table.loc[table['edge'], 'reading'])}. The fit-point J may be lower beyond it, "
                      "where the protocol does not search: that size* bounds the fit rather than locating it."]
        lines += ["", "Held-out (§ 4) at each reading's size*:", "",
                  "| reading | size* | held-out values run on every seed | median e_P | median e_T | J_held "
                  "| 95 % interval |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        done: dict[str, bool] = {}
        for r in table[table["best"]].itertuples():
            cells, grid = held_out_cells(study, runs, paper, r.reading, r.size, sorted(runs["seed"].unique()))
            h = HeldOut(r.size, cells, grid)
            lines.append(held_out_row(r.reading, h))
            held.setdefault(r.reading, {})[study.name] = h
            done[r.reading] = h.complete and grid.shape[1] >= REPLICATIONS
        n_p = int((every["metric"] == P).sum())
        lines += ["", f"Issue 38's acceptance numbers at size* (§ 5, reported, not scored): medians over the {n_p} "
                  f"published P and {len(every) - n_p} T cells of the {study.name} λ, s_max, em_max and m tables (the "
                  "default point once per table, the fit point included"
                  + ("; the issue's 48 P cells are these under both triggers" if study.name == "ligo" else "")
                  + "), over the cells run so far:", "",
                  "| reading | size* | P cells run | median e_P (≤ 0.5) | median e_T (≤ 0.05) |",
                  "|---|---:|---:|---:|---:|"]
        for r in table[table["best"]].itertuples():
            e_p, e_t, run = acceptance(every, runs, r.reading, r.size)
            lines.append(f"| {r.reading} | {r.size:g} | {run} of {n_p} | {_num(e_p, 2)} | {_num(e_t, 3)} |")
        todo += [c for reading in CANDIDATES for c in next_runs(study, table, reading, done.get(reading, False),
                                                                 tracking_uri)]
        differ, points = pd_ed_differ(paper)
        lines += ["", f"The paper's PD-SL-TSP1 and ED-SL-TSP1 values differ (P or T) at {differ} of its {points} "
                  f"{study.name} points; under the deadline trigger ours are identical by construction (§ 1, § 5).", ""]
    lines += decision(held, seeds)
    if todo:
        lines += ["", "### Runs still to make (resumable: finished runs are skipped; add hydra/launcher=serial on a "
                  "shared machine; `make selection` runs them all, in this order)", "", "```sh",
                  *(f"{SWEEP} {overrides}" for overrides in todo), "```"]
    return "\n".join(lines) + "\n", todo


def next_runs(study: Study, fitted: pd.DataFrame, reading: str, held_out_done: bool, tracking_uri: str) -> list[str]:
    """The sweeps a candidate needs next, in the protocol's order: the coarse grid (§ 3) on every seed, then
    the refinement around its best coarse size, then its held-out points at size* (§ 4)."""
    mine = fitted[fitted["reading"] == reading]
    full = set(mine.loc[mine["seeds"] >= REPLICATIONS, "size"])
    coarse = [s for s in study.grid if s not in full]
    if coarse:
        return commands(study, reading, ",".join(f"{s:g}" for s in coarse), tracking_uri, fit=True)
    missing = [s for s in study.refinement(best_coarse(study, mine)) if s not in full]
    if missing:
        return commands(study, reading, ",".join(f"{s:g}" for s in missing), tracking_uri, fit=True)
    size = float(mine.loc[mine["best"], "size"].iloc[0])
    return [] if held_out_done else commands(study, reading, f"{size:g}", tracking_uri, fit=False)


def commands(study: Study, reading: str, sizes: str, tracking_uri: str, fit: bool) -> list[str]:
    """The fit sweep of ``reading`` at ``sizes``, or its four held-out sweeps at size* ``sizes`` (§ 6): each
    one sweep's overrides for ``sweeps/run.py -m``."""
    trigger, multi_parent, late_rule = reading.split("/")
    common = (f"tracking.uri={tracking_uri} policy.remap_trigger={trigger} "
              f"policy.multi_parent={multi_parent} policy.late_rule={late_rule} workload.size={sizes}")
    if fit:
        return [f"experiment=selection_fit_{study.name} {common}"]
    pd_only = " policy.laxity_distribution=pd" if trigger == "deadline" else ""
    return [f"experiment={t.replace(study.name, f'selection_{study.name}', 1)} {common}{pd_only}"
            for t in study.tables]


def decision(held: dict[str, dict[str, HeldOut]], seeds: list[int]) -> list[str]:
    """The decision rule of § 5 over the readings complete on every workload (or why it cannot run yet)."""
    complete = {r: [parts[s.name] for s in STUDIES] for r, parts in held.items() if len(parts) == len(STUDIES)
                and all(h.complete and h.grid.shape[1] == len(seeds) for h in parts.values())}
    if not complete:
        return ["### Decision", "", "Not yet: no reading has every held-out run on both workloads (§ 4, § 5)."]
    missing = [r for r in CANDIDATES if r not in complete]
    final = not missing and len(seeds) >= REPLICATIONS
    draws = bootstrap(complete, seeds)
    point = {r: float(np.mean([held_out_loss(h.cells, h.means()) for h in parts]))
             for r, parts in complete.items()}
    best = min(point, key=lambda r: (point[r], invented(r)))
    heading = ["### Decision (§ 5)"] if final else [
        "### Provisional ranking — not the § 5 decision", "",
        f"Only {len(complete)} of the {len(CANDIDATES)} candidates are complete on both workloads, with "
        f"{len(seeds)} of the protocol's {REPLICATIONS} seeds; missing: {', '.join(missing) or 'none'}."]
    lines = [*heading, "", f"Paired bootstrap: {BOOTSTRAP} resamples of seeds {seeds}.", "",
             "| reading | invented rules | combined J | 95 % interval | J − J_best, 95 % interval | within noise |",
             "|---|---:|---:|---|---|---|"]
    near = []
    for r in sorted(point, key=point.get):
        lo, hi = np.percentile(draws[r], [2.5, 97.5])
        d_lo, d_hi = np.percentile(draws[r] - draws[best], [2.5, 97.5])
        tied = r == best or d_lo <= 0
        near += [r] if tied else []
        lines.append(f"| {r} | {invented(r)} | {point[r]:.2f} | [{lo:.2f}, {hi:.2f}] | [{d_lo:.2f}, {d_hi:.2f}] | "
                     f"{'yes' if tied else 'no'} |")
    fewest = min(invented(r) for r in near)
    chosen = [r for r in near if invented(r) == fewest]
    lines += ["", f"Lowest combined J: {best}. Within noise of it: {', '.join(near)}. Fewest invented rules among "
              f"those: {', '.join(chosen)}" + ("." if len(chosen) == 1 else
                                               " — a tie the evidence does not break; the tied factors keep their "
                                               "current defaults (§ 5).")]
    if final:
        pick = tie_break(chosen)
        sizes = ", ".join(f"{s.name} workload.size = {complete[pick][i].size:g}" for i, s in enumerate(STUDIES))
        lines += ["", f"**Chosen: {pick}**, at {sizes} (its size*, § 5): the defaults of the tables "
                  "(`conf/policy/rmdcwf.yaml`, `conf/workload/<workload>.yaml`)."]
    return lines


def tie_break(tied: list[str]) -> str:
    """The reading § 5 keeps among ``tied``: a factor they differ in keeps its default when the protocol was
    declared (:data:`DECLARED_DEFAULTS`), factors in the order trigger, multi_parent, late_rule.

    >>> tie_break(["deadline/align/planned", "deadline/align/forced"])
    'deadline/align/forced'
    >>> tie_break(["subdeadline/none/planned", "deadline/align/planned"])
    'subdeadline/none/planned'
    """
    return min(tied, key=lambda r: [level != default
                                    for level, default in zip(r.split("/"), DECLARED_DEFAULTS, strict=True)])


def _num(value: float, digits: int) -> str:
    return "—" if np.isnan(value) else f"{value:.{digits}f}"


def _median(values: np.ndarray) -> float:
    run = values[np.isfinite(values)]
    return float(np.median(run)) if len(run) else float("nan")


def _point_text(study: Study) -> str:
    return ", ".join(f"{k} = {v:.6g}" for k, v in study.fit.items())


def _shown(path: Path) -> str:
    """``path`` relative to the repository when inside it (the Results name the committed export so)."""
    return str(path.resolve().relative_to(REPO)) if path.resolve().is_relative_to(REPO) else str(path)


def export_study(tracking_uri: str, path: Path) -> int:
    """Write the study's finished runs (each experiment that has runs) from the store to ``path``; their count."""
    runsets = []
    for study in STUDIES:
        try:
            runsets.append(load_runs(study.experiment, tracking_uri))
        except AnalysisError as error:
            if not _no_runs(error):
                raise
    return write_export(runsets, path)


def _no_runs(error: AnalysisError) -> bool:
    """Whether ``error`` only says that an experiment of the study has no runs (yet) in the store or export (or
    that the store is not there yet: a study's first sweep creates it)."""
    return any(text in str(error) for text in ("unknown experiment", "no runs yet", "no MLflow store"))


def write(path: Path, results: str) -> None:
    """Replace what follows the Results heading of ``path``; the protocol above it stays byte for byte."""
    text = path.read_text()
    if RESULTS not in text:
        raise AnalysisError(f"{path}: no '{RESULTS.strip()}' heading to write below")
    path.write_text(text[:text.index(RESULTS) + len(RESULTS)] + "\n" + results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", required=True, help="the study's store (selection.md § 6)")
    parser.add_argument("--write", type=Path, help="selection.md to write the Results into (else: print)")
    parser.add_argument("--conf-dir", type=Path, default=REPO / "conf" / "experiment")
    parser.add_argument("--published", type=Path, default=REPO / "docs" / "paper" / "published")
    parser.add_argument("--pool-code", action="store_true", help="pool runs of several simulator-code fingerprints")
    parser.add_argument("--runs", type=Path, help="read the runs from this export instead of the store")
    parser.add_argument("--export-runs", type=Path, help="write the study's runs from the store to this file; stop")
    parser.add_argument("--next", action="store_true",
                        help="print the sweeps still to make instead, one per line (sweeps/run.py -m overrides)")
    args = parser.parse_args(argv)
    try:
        if args.export_runs:
            print(f"{export_study(args.tracking_uri, args.export_runs)} runs written to {args.export_runs}")
            return 0
        export = RunExport.read(args.runs) if args.runs else None
        results, todo = report(args.tracking_uri, args.conf_dir, args.published, args.pool_code, export)
        if args.next:
            print("".join(f"{overrides}\n" for overrides in todo), end="")
        elif args.write:
            write(args.write, results)
        else:
            print(results, end="")
    except AnalysisError as error:
        print(f"selection: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
