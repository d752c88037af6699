"""``LearnedPolicy``: a weights file in, a deterministic policy out; every bad file is one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sim.core import InputError
from sim.policies import policy_from_conf
from sim.policies.learned import FEATURES, KernelNet, LearnedPolicy
from sim.run import run
from sim.workloads import synthetic_hpc
from sweeps import task
from sweeps.env_config import compose_config
from tests.conftest import REPO


def trained(tmp_path: Path, backfill: str = "easy", seed: int = 0, name: str = "w.npz") -> Path:
    return KernelNet.initial(np.random.default_rng(seed), window=16, backfill=backfill).save(tmp_path / name)


def schedule(policy: Any, seed: int = 1, jobs: int = 400) -> list[float]:
    from sim.core import Cluster

    workload = synthetic_hpc(np.random.default_rng(seed), jobs=jobs, nodes=64, arrival_rate=0.0006)
    return run(workload, Cluster.nodes(64), policy).tables["jobs"]["start_time"]


@pytest.mark.parametrize("backfill", ["none", "easy"])
def test_same_weights_same_schedule_in_this_process_and_another(tmp_path: Path, backfill: str) -> None:
    path = trained(tmp_path, backfill)
    first = schedule(LearnedPolicy(str(path)))
    assert schedule(LearnedPolicy(str(path))) == first
    code = ("import sys; sys.path.insert(0, 'tests'); from test_env_policy import schedule; "
            f"from sim.policies.learned import LearnedPolicy; print(schedule(LearnedPolicy({str(path)!r})))")
    other = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert other.stdout.strip() == str(first)
    assert schedule(LearnedPolicy(str(trained(tmp_path, backfill, seed=1, name="v.npz")))) != first


def test_a_network_that_scores_every_job_alike_is_easy(tmp_path: Path) -> None:
    """Ties go to the oldest job: with ``backfill: easy`` that is EASY, start for start."""
    net = KernelNet.initial(np.random.default_rng(0), window=16, backfill="easy")
    flat = net.with_vector(np.zeros(net.size)).save(tmp_path / "flat.npz")
    assert schedule(LearnedPolicy(str(flat))) == schedule(policy_from_conf("easy"))
    assert schedule(LearnedPolicy(str(trained(tmp_path)))) != schedule(policy_from_conf("easy"))


def test_the_weights_round_trip_and_name_the_input_file(tmp_path: Path) -> None:
    net = KernelNet.initial(np.random.default_rng(3), hidden=(4,), window=5, backfill="none")
    path = net.save(tmp_path / "w.npz")
    policy = LearnedPolicy(str(path))
    assert np.array_equal(policy.net.vector(), net.vector()) and (policy.window, policy.backfill) == (5, "none")
    assert policy.input_files() == {str(path): path}
    import hashlib

    assert policy.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def npz(tmp_path: Path, **changes: Any) -> Path:
    net = KernelNet.initial(np.random.default_rng(0), hidden=(3,), window=4)
    arrays = {"W0": net.layers[0][0], "b0": net.layers[0][1], "W1": net.layers[1][0], "b1": net.layers[1][1],
              "wait": np.float64(0.0), "window": np.int64(4), "backfill": np.str_("easy"),
              "features": np.str_(",".join(FEATURES))}
    arrays.update(changes)
    path = tmp_path / "bad.npz"
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p / "nowhere.npz", "nowhere.npz: cannot read it (No such file or directory); train one with"),
    (lambda p: (p / "t.npz").write_bytes(b"not a zip") and p / "t.npz", "not a weights .npz (not a zip archive)"),
    (lambda p: (p / "h.npz").write_bytes(npz(p).read_bytes()[:200]) and p / "h.npz", "not a weights .npz"),
    (lambda p: npz(p, W1=None), "the last layer has 3 outputs; expected one score"),
    (lambda p: npz(p, window=None), "missing array(s) window"),
    (lambda p: npz(p, features=np.str_("nodes,wait")), "trained on features nodes,wait"),
    (lambda p: npz(p, W0=np.ones((2, 3))), "layer 0 has W (2, 3) and b (3,); expected W (7, n)"),
    (lambda p: npz(p, b1=np.ones(2)), "layer 1 has W (3, 1) and b (2,)"),
    (lambda p: npz(p, W1=np.ones((3, 2)), b1=np.ones(2)), "the last layer has 2 outputs"),
    (lambda p: npz(p, window=np.int64(0)), "window 0 and backfill 'easy'; expected a positive integer"),
    (lambda p: npz(p, backfill=np.str_("conservative")), "backfill 'conservative'"),
    (lambda p: npz(p, wait=np.float64(np.nan)), "weights that are not finite numbers"),
    (lambda p: npz(p, W0=np.array([[object()]] * 7, dtype=object)), "not a weights .npz"),
])
def test_a_missing_or_garbled_weights_file_is_one_line(tmp_path: Path, make: Any, message: str) -> None:
    path = make(tmp_path)
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        LearnedPolicy(str(path))
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_policy_learned_composes_and_runs_with_its_weights(tmp_path: Path) -> None:
    path = trained(tmp_path)
    cfg = compose_config(["policy=learned", f"policy.weights={path}", "workload.jobs=200", "seed=4"])
    assert cfg["policy"] == {"_target_": "sim.policies.learned.LearnedPolicy", "weights": str(path),
                             "base_dir": str(Path.cwd())}  # a relative weights path: from where it was launched
    task.prepare(cfg)
    outcome = task.run_one(cfg)
    assert outcome.summary["jobs"] == 200 and outcome.tables["jobs"]["start_time"] == task.run_one(
        cfg).tables["jobs"]["start_time"]
    with pytest.raises(InputError, match=re.escape("nowhere.npz: cannot read it")) as caught:
        task.prepare({**cfg, "policy": {**cfg["policy"], "weights": str(tmp_path / "nowhere.npz")}})
    assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match="policy 'learned' schedules hpc workloads, not workflow workloads"):
        task.prepare(compose_config(["policy=learned", f"policy.weights={path}", "cluster=rmdcwf", "workload=ligo"]))


def test_a_choice_the_mask_rules_out_stops_the_run() -> None:
    """A policy of one's own behind ``WindowPolicy`` that picks a masked slot is a SchedulingError, never
    replaced by a valid choice."""
    from sim.core import Cluster, rigid_job
    from sim.engine import SchedulingError, simulate
    from sim.policies.learned import WindowPolicy

    class Last(WindowPolicy):
        def choose(self, obs: np.ndarray, mask: np.ndarray, now: float) -> int:
            return len(mask) - 1  # wait, even on an idle machine

    with pytest.raises(SchedulingError, match=re.escape("Last: action 2 is not valid at t=0.0 (mask [True, False, "
                                                        "False])")):
        simulate([rigid_job(0, 0.0, 2, 10.0)], Cluster.nodes(4), Last(2, "none"))
