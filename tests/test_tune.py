"""Any Hydra sweeper on schedlab's launcher: Optuna (hydra-optuna-sweeper, the ``tune`` extra) tunes a numeric
option of a researcher's own policy — a package and a conf folder outside the repo, found through
``PYTHONPATH`` and ``hydra.searchpath`` — on Ray, every trial a FINISHED MLflow run; the same study again runs
nothing and prints the same best parameters; a multi-objective study reads several metrics; an objective
that is not a metric is refused."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_sweeper import ENV, RUN, SMALL, runs, sqlite_uri

pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the tune extra (make test installs it)")


def study(cwd: Path, own: Path, *overrides: str, check: bool = True) -> subprocess.CompletedProcess:
    """An Optuna study over ``policy=firstfit``'s ``max_overtakes`` (examples/my_policy copied to ``own``)."""
    args = [sys.executable, str(RUN), "-m", *SMALL, "hydra/sweeper=optuna", f"hydra.searchpath=[file://{own}/myconf]",
            "policy=firstfit", "workload.jobs=400", "workload.arrival_rate=0.012", "seed=1000",
            "policy.max_overtakes=int(interval(0,20))", "hydra.sweeper.n_trials=6", "hydra.sweeper.sampler.seed=7",
            "experiment_name=tune", "hydra.launcher.progress=false", *overrides]
    env = {**ENV, "PYTHONPATH": f"{own}{os.pathsep}{ENV.get('PYTHONPATH', '')}"}
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture()
def own_policy(tmp_path: Path) -> Path:
    """The README's own-policy example, outside the repository."""
    return Path(shutil.copytree(REPO / "examples" / "my_policy", tmp_path / "mine"))


def best(proc: subprocess.CompletedProcess) -> tuple[str, str]:
    return (re.search(r"Best parameters: (\{.*\})", proc.stdout + proc.stderr).group(1),
            re.search(r"Best value: (\S+)", proc.stdout + proc.stderr).group(1))


def test_optuna_tunes_an_own_policy_on_ray_and_a_rerun_runs_nothing(tmp_path: Path, own_policy: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first = study(work, own_policy, "sweep.objective=[bsld/mean]")
    assert "starting a local Ray instance" in first.stdout and "Best parameters: {'policy.max_overtakes':" in \
        first.stdout + first.stderr
    found = runs(sqlite_uri(work), "tune")
    assert found and {r.info.status for r in found} == {"FINISHED"}
    assert {r.data.params["policy"] for r in found} == {"firstfit"}
    assert {r.data.params["policy._target_"] for r in found} == {"mysched.firstfit.FirstFit"}
    keys = [r.data.tags["schedlab.run_key"] for r in found]
    assert len(keys) == len(set(keys)) <= 6  # a repeated suggestion is the same run, run once
    value = float(best(first)[1])
    assert value == min(r.data.metrics["bsld/mean"] for r in found)  # the study saw what MLflow recorded

    again = study(work, own_policy, "sweep.objective=[bsld/mean]")
    assert best(again) == best(first)
    assert " done" not in again.stdout.replace("0 done", "") and "starting a local Ray" not in again.stdout
    assert again.stdout.count("nothing to run: all") == 3  # three batches of two trials, every one recorded
    assert len(runs(sqlite_uri(work), "tune")) == len(found)


@pytest.mark.slow  # make test-slow: a long fault case (issue 37: the default suite under 10 min)
def test_a_multi_objective_study_and_a_missing_metric(tmp_path: Path, own_policy: Path) -> None:
    multi = study(tmp_path, own_policy, "sweep.objective=[bsld/mean,util]",
                  "hydra.sweeper.direction=[minimize,maximize]", "hydra.sweeper.n_trials=4")
    assert "Number of Pareto solutions:" in multi.stdout + multi.stderr
    bad = study(tmp_path, own_policy, "sweep.objective=[wait/avg]", "hydra.sweeper.n_trials=2", check=False)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "sweep.objective: 'wait/avg' is not a metric of this run" in bad.stderr and "wait/mean" in bad.stderr
