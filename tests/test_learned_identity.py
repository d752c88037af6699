"""The weights file is an input of a learned policy's runs: retraining reruns them and nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from sim.policies.learned import KernelNet
from sweeps.identity import sha256_file
from tests.test_sweeper import ENV, RUN, runs, sqlite_uri


def test_retrained_weights_rerun_only_the_learned_policys_runs(tmp_path: Path) -> None:
    def sweep() -> str:
        proc = subprocess.run([sys.executable, str(RUN), "-m", "hydra/launcher=serial", "cluster=hpc16",
                               "workload.jobs=200", "policy=learned,fcfs", "seed=100,101"],
                              cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    def train(seed: int) -> None:  # policy.weights' default, relative: read from where the sweep is launched
        KernelNet.initial(np.random.default_rng(seed), window=16).save(tmp_path / "models" / "learned.npz")

    train(0)
    assert "4 done, 0 failed" in sweep()
    first = runs(sqlite_uri(tmp_path))
    assert {r.data.tags.get("schedlab.input_files", "") for r in first if r.data.params["policy"] == "learned"} == {
        '{"policy:models/learned.npz":"' + sha256_file(tmp_path / "models" / "learned.npz")[:16] + '"}'}
    assert "nothing to run" in sweep()
    train(1)
    out = sweep()
    assert "2 done, 0 failed, 2 skipped" in out and "2 reran: input file changed: policy:models/learned.npz" in out
    before = {r.info.run_id for r in first}
    assert [r.data.params["policy"] for r in runs(sqlite_uri(tmp_path)) if r.info.run_id not in before] == [
        "learned", "learned"]
