"""``make selection`` (sweeps/selection.py) runs the declared study to its end: the sweeps analysis/selection.py
says are still to make, pass after pass, until none is left — and stops, saying why, when a pass changes nothing
or a sweep fails."""

from __future__ import annotations

from pathlib import Path

import pytest

import sweeps.selection as driver
from analysis import AnalysisError
from analysis.selection import CANDIDATES, STUDIES, main


def passes(monkeypatch: pytest.MonkeyPatch, plans: list[list[str]], codes: dict[str, int] | None = None
           ) -> list[list[str]]:
    """Make the study's plan ``plans`` pass after pass (the last one repeating); the sweep commands run."""
    ran: list[list[str]] = []
    plans = list(plans)
    monkeypatch.setattr(driver, "plan", lambda uri: plans.pop(0) if len(plans) > 1 else plans[0])

    def run_sweep(command: list[str]) -> int:
        ran.append(command[2:])
        return (codes or {}).get(command[3], 0)

    monkeypatch.setattr(driver, "run_sweep", run_sweep)
    return ran


def test_every_sweep_still_to_make_runs_until_none_is_left(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    ran = passes(monkeypatch, [["experiment=a workload.size=50,51", "experiment=b"], ["experiment=c"], []])
    assert driver.main(["--tracking-uri", "sqlite:////s.db", "hydra/launcher=serial"]) == 0
    assert ran == [["-m", "experiment=a", "workload.size=50,51", "hydra/launcher=serial"],
                   ["-m", "experiment=b", "hydra/launcher=serial"], ["-m", "experiment=c", "hydra/launcher=serial"]]
    assert "the study is complete (3 sweeps" in capsys.readouterr().out


def test_a_pass_that_leaves_the_same_sweeps_to_make_stops(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    ran = passes(monkeypatch, [["experiment=a"]])
    assert driver.main(["--tracking-uri", "u"]) == 1
    assert ran == [["-m", "experiment=a"]]  # once, not forever
    assert "still to make, the first: experiment=a" in capsys.readouterr().err


def test_a_failing_sweep_stops_the_study_with_its_status(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = passes(monkeypatch, [["experiment=a", "experiment=b"], []], codes={"experiment=a": 1})
    assert driver.main(["--tracking-uri", "u"]) == 1 and ran == [["-m", "experiment=a"]]


def test_a_broken_store_is_its_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The plan is analysis/selection.py --next's (a real child process here): its error line, its status."""
    (tmp_path / "mlflow.db").write_text("not a database")
    assert driver.main(["--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("selection: ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("why", ["unknown experiment 'x' in sqlite:////s.db", "no MLflow store at /s.db (run …)"])
def test_an_empty_store_needs_every_candidates_coarse_grid(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str], why: str) -> None:
    """No runs yet, or no store yet (the study's first sweep makes it): every candidate's coarse grid."""
    import analysis.selection as selection

    def no_runs(experiment: str, uri: str) -> None:
        raise AnalysisError(why)

    monkeypatch.setattr(selection, "load_runs", no_runs)
    assert main(["--tracking-uri", "sqlite:////s.db", "--next"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(STUDIES) * len(CANDIDATES)
    for study in STUDIES:
        mine = [line for line in lines if f"experiment=selection_fit_{study.name} " in line]
        grid = ",".join(f"{s:g}" for s in study.grid)
        assert len(mine) == len(CANDIDATES) and all(line.endswith(f"workload.size={grid}") for line in mine)
