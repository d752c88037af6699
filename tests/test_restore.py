"""``sweeps/restore.py``: a store restored from a run export reads back as the export, restores once, and
lets a sweep resume from it (runs of the same code and inputs skipped, others rerun); an export it cannot
restore is one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from analysis.export import INPUTS, TAGS
from sweeps.restore import RESTORED_FROM, main, restore
from tests.test_paper import build, paper, sweep_tables  # noqa: F401 (the fixture)


@pytest.fixture
def export(paper: Path, tmp_path: Path) -> Path:  # noqa: F811
    path = tmp_path / "runs.parquet"
    assert build(paper, tmp_path / "unused", "--export-runs", str(path), "--tracking-uri",
                 f"sqlite:///{paper}/mlflow.db") == 0
    return path


def resume(paper: Path, store: Path) -> subprocess.CompletedProcess:  # noqa: F811
    """make paper's sweeps of the test tables again, into ``store``."""
    return sweep_tables(paper, store.parent, f"tracking.uri=sqlite:///{store}")


def test_a_restored_store_reads_back_as_its_export_and_a_sweep_resumes_from_it(paper: Path, export: Path,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    frame = pd.read_parquet(export)
    assert frame[INPUTS].notna().all()  # the export keeps what a resume matches on: key, code and inputs
    store = tmp_path / "restored" / "mlflow.db"
    store.parent.mkdir()
    assert restore(export, f"sqlite:///{store}", progress=lambda _: None) == (len(frame), 0)
    assert restore(export, f"sqlite:///{store}", progress=lambda _: None) == (0, len(frame))  # once only
    build(paper, tmp_path / "from_export", "--runs", str(export), "--no-figures")
    build(paper, tmp_path / "from_store", "--tracking-uri", f"sqlite:///{store}", "--no-figures")
    for table in sorted((tmp_path / "from_export").glob("*.csv")):
        assert (tmp_path / "from_store" / table.name).read_bytes() == table.read_bytes(), table.name
    again = tmp_path / "reexport.parquet"
    assert build(paper, tmp_path / "unused", "--export-runs", str(again), "--tracking-uri", f"sqlite:///{store}") == 0
    pd.testing.assert_frame_equal(pd.read_parquet(again).drop(columns="run_id"), frame.drop(columns="run_id"))
    done = resume(paper, store)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("nothing to run: all") == 2, done.stdout[-2000:]  # both tables' sweeps
    assert all(runs_of(store)[f"tags.{RESTORED_FROM}"] == export.name)  # no run was added


def test_a_restored_run_of_other_code_is_rerun(paper: Path, export: Path, tmp_path: Path) -> None:  # noqa: F811
    frame = pd.read_parquet(export)
    frame.loc[0, TAGS[1]] = "0" * 20  # as if it ran on another simulator
    frame.to_parquet(export)
    store = tmp_path / "mlflow.db"
    restore(export, f"sqlite:///{store}", progress=lambda _: None)
    done = resume(paper, store)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = runs_of(store)
    assert runs[f"tags.{RESTORED_FROM}"].isna().sum() == 1 and len(runs) == len(frame) + 1, done.stdout[-2000:]


def runs_of(store: Path) -> pd.DataFrame:
    """Every run in the store at ``store``: its id and tags."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{store}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=1000)
    return pd.DataFrame([{"run_id": r.info.run_id, **{f"tags.{k}": v for k, v in r.data.tags.items()}} for r in runs])


@pytest.mark.parametrize(("spoil", "args", "message"), [
    (lambda f: f.drop(columns=INPUTS), [],
     "restore: {path}: 12 runs without their inputs fingerprint (an export written before it was kept): give --inputs "
     "none if they read no input file (a generated workload), else rerun them"),
    (lambda f: f.drop(columns=TAGS[0]), ["--inputs", "none"],
     "restore: {path} is not a run export: no column tags.schedlab.run_key"),
])
def test_an_export_that_cannot_be_restored_is_one_line(export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      spoil: object, args: list[str], message: str) -> None:
    spoil(pd.read_parquet(export)).to_parquet(export)  # type: ignore[operator]
    store = tmp_path / "mlflow.db"
    assert main(["--runs", str(export), "--tracking-uri", f"sqlite:///{store}", *args]) == 2
    assert capsys.readouterr().err == message.format(path=export) + "\n"
    assert not store.exists()  # nothing half restored
