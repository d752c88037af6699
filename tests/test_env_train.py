"""``sweeps/train.py``: ES on Ray end to end on a tiny problem — weights a policy loads, an MLflow run with
the curve, the weights as an artifact and their digest — and bad settings as one line before Ray starts."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.policies.learned import LearnedPolicy
from sweeps import train
from tests.conftest import REPO

EVALUATION_SEEDS = range(100, 110)  # conf/experiment/learned.yaml


def test_training_seeds_never_include_the_evaluation_seeds() -> None:
    used = set(train.VALIDATION_SEEDS) | set(range(train.TRAIN_SEEDS, train.TRAIN_SEEDS + 10**6))
    assert not used & set(EVALUATION_SEEDS)


def test_training_needs_numpy_and_ray_but_not_gymnasium() -> None:
    code = "import sys, sweeps.train; print(sorted(m for m in ('gymnasium', 'sim.env') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_es_gradient_of_a_known_ranking() -> None:
    """Antithetic pairs whose + side always wins move θ along ε."""
    eps = np.eye(3)
    ranks = train.centered_ranks(np.array([3.0, 2.0, 1.0, -3.0, -2.0, -1.0]))
    gradient = (ranks[:3] - ranks[3:]) @ eps
    assert (gradient > 0).all() and gradient[0] > gradient[2]


def test_training_end_to_end_on_a_tiny_problem(tmp_path: Path) -> None:
    out, db = tmp_path / "w.npz", tmp_path / "mlflow.db"
    done = subprocess.run(
        [sys.executable, "sweeps/train.py", "cluster=hpc16", "workload.jobs=60", "workload.arrival_rate=0.01",
         f"tracking.uri=sqlite:///{db}", f"tracking.artifact_root={tmp_path / 'art'}", "--iterations", "2",
         "--pairs", "1", "--seeds-per-iteration", "1", "--validate-every", "1", "--window", "8",
         "--out", str(out), "--workers", "1"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"weights: {out}; MLflow run" in done.stdout
    policy = LearnedPolicy(str(out))
    assert (policy.window, policy.backfill) == (8, "easy")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    (run,) = client.search_runs([client.get_experiment_by_name(train.EXPERIMENT).experiment_id])
    assert run.info.status == "FINISHED" and run.data.params["window"] == "8"
    assert run.data.tags["schedlab.weights_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest() == policy.sha256
    assert [m.step for m in client.get_metric_history(run.info.run_id, "valid/bsld_mean")] == [0, 1, 2]  # 0: untrained
    assert {"valid/bsld_easy", "valid/bsld_fcfs", "train/bsld_mean"} <= set(run.data.metrics)
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["w.npz"]


@pytest.mark.parametrize(("args", "message"), [
    (["--iterations", "0"], "--iterations must be positive, got 0"),
    (["--backfill", "conservative"], "--backfill must be one of none, easy"),
    (["cluster.nodes=0"], "cluster.nodes must be a positive"),
])
def test_bad_settings_are_one_line_before_ray_starts(args: list[str], message: str, capsys) -> None:
    assert train.main(["tracking=none", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
