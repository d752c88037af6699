"""Issue 26's fault trial, analysis side: a broken store, Ctrl-C during ``make paper``, figures that say
what they show.

Every fault ends in one line (the file named, what is wrong) and a non-zero status; a store is never
created, migrated or touched by reading it; each figure's own text states its sample (runs per cell
of how many, jobs, which run), checked against the data from the matplotlib Figure itself.
"""

from __future__ import annotations

import contextlib
import doctest
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from mlflow import MlflowClient

from analysis import figures, paper_figures, store
from analysis import paper as paper_cli
from analysis import report as report_cli
from analysis.figures import plot_wait_ecdf
from analysis.paper_result import TableResult
from analysis.paper_spec import PaperTable
from analysis.stats import aggregate
from tests.conftest import REPO
from tests.test_analysis import Store, jobs_table
from tests.test_sweeper import ENV

SEEDS = range(1, 7)
POLICIES = ("easy", "conservative")
JOBS_PER_RUN = len(jobs_table("easy", 1))
SHARES = pd.DataFrame({"time": [0.0, 10, 20, 0, 10, 20], "user": list("AAABBB"),
                       "dominant_share": [0.2, 0.5, 0.0, 0.3, 0.4, 0.0]})


@pytest.fixture(scope="module")
def mlstore(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Two policies × six seeds, each run with its jobs table and DRF dominant shares."""
    s = Store(tmp_path_factory.mktemp("faults"))
    exp = s.experiment("cells")
    shares = s.root / "dominant_shares.parquet"
    SHARES.to_parquet(shares)
    for policy in POLICIES:
        for seed in SEEDS:
            run = s.log(exp, {"policy": policy, "seed": seed, "workload.seed": seed, "cluster.nodes": 8},
                        {"wait/mean": 10.0 * seed + (5 if policy == "easy" else 0), "util": 0.5},
                        jobs=jobs_table(policy, seed))
            s.client.log_artifact(run, str(shares))
    return s


def cli(kind: str, uri: str, tmp_path: Path) -> int:
    """``analysis/report.py`` or ``analysis/paper.py`` (in process) on the store ``uri``."""
    if kind == "report":
        return report_cli.main(["--experiment", "cells", "--tracking-uri", uri, "--out", str(tmp_path / "rep")])
    return paper_cli.main(["--tracking-uri", uri, "--out", str(tmp_path / "paper"),
                           "--conf-dir", str(REPO / "conf" / "experiment"), "--only", "paper_backfill",
                           "--published", str(REPO / "docs" / "paper" / "published")])


def one_line_error(err: str, path: Path, what: str) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.match(r"(report|paper)\.py: error: ", err) and str(path) in err and what in err, err


# -- a broken store ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["report", "paper"])
def test_random_bytes_are_one_line_and_left_as_they_are(kind: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "x.db"
    path.write_bytes(random.Random(26).randbytes(8192))
    before = path.read_bytes()
    assert cli(kind, f"sqlite:///{path}", tmp_path) == 2
    one_line_error(capsys.readouterr().err, path, "is not an SQLite database (an MLflow store)")
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]


@pytest.mark.parametrize("kind", ["report", "paper"])
def test_an_empty_file_gets_no_schema(kind: str, tmp_path: Path, capsys) -> None:
    """MLflow used to write its whole schema into a 0-byte file handed to a report."""
    path = tmp_path / "empty.db"
    path.touch()
    assert cli(kind, f"sqlite:///{path}", tmp_path) == 2
    one_line_error(capsys.readouterr().err, path, "is an empty file (0 bytes), not an MLflow store; left untouched")
    assert path.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def edit(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


def foreign(path: Path) -> None:
    edit(path, "CREATE TABLE notes (text)")


def older(path: Path) -> None:
    edit(path, "PRAGMA journal_mode = WAL", "DROP TABLE scheduler_leases")  # WAL, as the sweeps' stores


def no_default_experiment(path: Path) -> None:
    edit(path, "DELETE FROM experiments WHERE experiment_id = 0")


def damaged(path: Path) -> None:
    with path.open("r+b") as f:
        f.seek(100)  # past the header: page 1, the table list
        f.write(random.Random(1).randbytes(3996))


@pytest.mark.parametrize(("spoil", "what"), [
    (foreign, "is an SQLite database without MLflow's experiments and runs tables, not an MLflow store"),
    (older, "lacks 1 of the"),
    (no_default_experiment, "has no default experiment (id 0), which MLflow would write into it"),
    (damaged, "is a damaged SQLite database (database disk image is malformed)"),
])
def test_a_store_mlflow_would_write_to_is_refused(mlstore: Store, spoil, what: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "store.db"
    if spoil is not foreign:
        shutil.copy(mlstore.root / "mlflow.db", path)
    spoil(path)
    before = path.read_bytes()
    assert cli("report", f"sqlite:///{path}", tmp_path) == 2
    one_line_error(capsys.readouterr().err, path, what)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["store.db"]


def test_the_command_line_prints_one_line_not_a_traceback(tmp_path: Path) -> None:
    """The reported case as run: a 72-line traceback before."""
    path = tmp_path / "x.db"
    path.write_bytes(random.Random(72).randbytes(8192))
    proc = subprocess.run([sys.executable, str(REPO / "analysis" / "report.py"), "--tracking-uri", f"sqlite:///{path}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"report.py: error: {path} is not an SQLite database (an MLflow store): it does not start "
                           f"with SQLite's header; {store.CHECK}\n")


def test_a_path_to_an_sqlite_file_without_the_scheme_says_how_to_name_it(mlstore: Store, capsys) -> None:
    path = mlstore.root / "mlflow.db"
    assert report_cli.main(["--tracking-uri", str(path), "--table-only"]) == 2
    one_line_error(capsys.readouterr().err, path, f"an SQLite store is given as sqlite:///{path}")


@pytest.mark.parametrize("module", [store, paper_figures])
def test_doctests(module) -> None:
    assert doctest.testmod(module).failed == 0


# -- Ctrl-C during make paper -------------------------------------------------------------------------------

SLOW = """# @package _global_
experiment_name: paper-interrupt
workload: {jobs: 1500}
hydra:
  sweeper:
    params:
      policy: easy,conservative
      seed: range(0,30)
"""


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (parents read from /proc/*/stat)."""
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found, todo = set(), [pid]
    while todo:
        up = todo.pop()
        below = [child for child, of in parent.items() if of == up and child not in found]
        found.update(below)
        todo += below
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_ctrl_c_during_make_paper_stops_the_sweep_and_ends_in_one_line(tmp_path: Path) -> None:
    """A terminal's Ctrl-C (SIGINT to the whole foreground group) used to end in a 17-line traceback."""
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "paper_slow.yaml").write_text(SLOW)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, str(REPO / "sweeps" / "paper.py"), "--conf-dir", str(conf),
                                 f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "hydra.launcher.progress=false"],
                                cwd=tmp_path, env=ENV, stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            deadline = time.monotonic() + 240
            while "Launching" not in out.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert proc.poll() is None, out.read_text() + err.read_text()
            time.sleep(1.0)
            below = descendants(proc.pid)
            assert below, "the sweep runs as a child of sweeps/paper.py"
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal does: paper.py's group, not the sweep's
            assert proc.wait(timeout=120) == 130
        finally:
            for pid in [proc.pid, *descendants(proc.pid)] if proc.poll() is None else []:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    text = out.read_text() + err.read_text()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert not re.search(r"\b\w+\.cc:\d+", text), text  # no log line of Ray's C++ (its task_manager's stack)
    assert err.read_text().splitlines()[-1] == "interrupted: rerun make paper to resume (finished runs are kept)"
    assert "sweep interrupted" in out.read_text()  # the sweep itself stopped as on Ctrl-C, recording what finished
    deadline = time.monotonic() + 60
    while any(alive(p) for p in below) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [p for p in below if alive(p)], "the sweep (or its Ray processes) outlived sweeps/paper.py"


# -- figures say what they show -------------------------------------------------------------------------------


def texts(fig: plt.Figure) -> str:
    """Every title of a figure: its suptitle, the axes' titles and free text, one per line."""
    parts = [fig._suptitle.get_text()] if fig._suptitle else []
    parts += [ax.get_title() for ax in fig.axes] + [t.get_text() for t in fig.texts if t is not fig._suptitle]
    return "\n".join(p for p in parts if p)


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """stem → the text of each figure the report saves (the files are still written)."""
    kept: dict[str, str] = {}
    save = figures.save

    def keep(fig: plt.Figure, out: Path, stem: str) -> list[Path]:
        kept[stem] = texts(fig)
        return save(fig, out, stem)

    monkeypatch.setattr(figures, "save", keep)
    return kept


def test_the_wait_ecdf_states_the_replications_it_drew(drawn: dict[str, str], tmp_path: Path) -> None:
    """The reported case: 10 of 60 replications per cell drawn, titled 'over all replications'."""
    waits = pd.concat([pd.DataFrame({"wait": [float(j % 7) for j in range(300)], "policy": policy,
                                     "run": f"{policy}-{seed}"}) for policy in POLICIES for seed in range(10)])
    waits.iloc[:4, 0] = float("nan")  # four jobs never started
    plot_wait_ecdf(waits, "policy", tmp_path, "ecdf", available=pd.Series({"easy": 60, "conservative": 60}))
    assert drawn["ecdf"] == ("Per-job wait, ECDF\n"
                             "10 of 60 replications per cell, 5,996 jobs (4 that never started left out)")


def test_every_report_figure_states_its_sample(mlstore: Store, drawn: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "rep"
    assert report_cli.main(["--experiment", "cells", "--tracking-uri", mlstore.uri, "--out", str(out),
                            "--metrics", "wait/mean,util", "--ecdf-runs", "2", "--gantt-jobs", "100"]) == 0
    params = MlflowClient(mlstore.uri).search_runs(
        [MlflowClient(mlstore.uri).get_experiment_by_name("cells").experiment_id])
    who = {r.info.run_id[:8]: (r.data.params["policy"], r.data.params["seed"]) for r in params}
    assert drawn["wait_ecdf"].endswith(f"\n2 of {len(SEEDS)} replications per cell (lowest seeds), "
                                       f"{2 * len(POLICIES) * JOBS_PER_RUN} jobs")
    for metric in ("wait_mean", "util"):
        assert f"n = {len(SEEDS)} runs per point" in drawn[f"{metric}_vs_policy"]
    [gantt] = [stem for stem in drawn if stem.startswith("gantt_")]
    run = gantt.removeprefix("gantt_")
    policy, seed = who[run]
    assert drawn[gantt].startswith(f"Schedule of run {run} (policy={policy}, seed={seed})\n"
                                   f"first {JOBS_PER_RUN} of {JOBS_PER_RUN} jobs by submit time")
    assert drawn[f"utilisation_{run}"].startswith(f"Utilisation of run {run} (policy={policy}, seed={seed})\n"
                                                  f"all {JOBS_PER_RUN} jobs;")
    shares = drawn["dominant_shares"].splitlines()
    assert shares[0] == f"Dominant share per user over time: one run per panel (seed={seed}; same jobs in every panel)"
    panels = sorted(shares[1:])
    assert len(panels) == len(POLICIES)
    for line in panels:
        label, peer = re.fullmatch(r"policy = (\w+) \(run (\w{8})\)", line).groups()
        assert who[peer] == (label, seed)


def test_a_paper_figure_states_n_per_point() -> None:
    design = pd.DataFrame({"cluster.m": [40, 40, 40, 50, 50], "config": ["pd"] * 5,
                           "turnaround/mean": [1.0, 2.0, 3.0, 4.0, 5.0]})
    summary = aggregate(design, ["cluster.m"], ["config"], ["turnaround/mean"])
    published = pd.DataFrame({"row": ["40"], "config": ["pd"], "metric": ["turnaround/mean"], "mean": [2.5],
                              "halfwidth": [float("nan")], "source": ["test"]})
    table = PaperTable("t", "a table", "exp", "cluster.m", ["config"], ["turnaround/mean"], [], Path("t.yaml"),
                       published)
    fig = paper_figures.figure(TableResult(table, design, summary, pd.DataFrame()))
    plt.close(fig)
    assert texts(fig).splitlines()[:2] == [
        "a table", "ours (solid): mean ± 95% t-CI over n = 2–3 replications per point; "
                   "paper (dashed, hollow): published value ± half-width where given"]
