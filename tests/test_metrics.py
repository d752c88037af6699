"""Summary metrics against hand-computed values, and determinism across processes."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim import Cluster, rigid_job, simulate
from sim.metrics import job_table, summarize
from sim.policies import policy_from_conf
from sim.workloads import synthetic_hpc, write_jobs_csv
from tests.conftest import REPO


def test_summary_by_hand() -> None:
    # 10 nodes. Job 0: 0→100 on 10 nodes. Job 1 (submit 5, 4 nodes, runs 5 s) waits 95 s.
    jobs = [rigid_job(0, 0, 10, 100), rigid_job(1, 5, 4, 50, runtime=5)]
    result = simulate(jobs, Cluster.nodes(10), policy_from_conf("fcfs"))
    summary = summarize(result)
    assert summary["jobs"] == 2
    assert summary["wait/mean"] == pytest.approx(47.5)
    assert summary["wait/max"] == 95
    # bsld: job 0 = max(1, 100/100) = 1; job 1 = (95 + 5) / max(5, 10) = 10
    assert summary["bsld/mean"] == pytest.approx(5.5)
    assert summary["turnaround/mean"] == pytest.approx((100 + 100) / 2)
    assert summary["makespan"] == 105
    assert summary["util"] == pytest.approx((10 * 100 + 4 * 5) / (10 * 105))
    table = job_table(result)
    assert table["wait"] == [0, 95] and table["bsld"] == [1, 10] and table["nodes"] == [10, 4]


def test_multi_resource_utilisation_is_per_resource() -> None:
    from sim.core import Job

    cluster = Cluster(("cpu", "mem"), ((4, 8),))
    jobs = [Job(0, 0, (2, 8), 10, 10)]
    summary = summarize(simulate(jobs, cluster, policy_from_conf("fcfs_multi")))
    assert summary["util/cpu"] == pytest.approx(0.5) and summary["util/mem"] == pytest.approx(1.0)


@pytest.mark.parametrize("policy", ["easy", "conservative_classic"])
def test_same_input_same_schedule_in_another_process(tmp_path: Path, policy: str) -> None:
    workload = synthetic_hpc(np.random.default_rng(7), jobs=300, nodes=64, arrival_rate=0.002)
    trace = tmp_path / "trace.csv"
    write_jobs_csv(workload, trace)
    out = tmp_path / "schedule.csv"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, "-m", "sim", str(trace), "--nodes", "64", "--policy", policy, "--out", str(out)],
                   cwd=REPO, env=env, check=True, capture_output=True)
    here = simulate(workload.jobs, Cluster.nodes(64), policy_from_conf(policy))
    there = {int(r["job_id"]): (float(r["start_time"]), float(r["end_time"])) for r in csv.DictReader(out.open())}
    assert there == {r.job.id: (r.start, r.end) for r in here.records}


def test_pure_python_summary_matches_numpy() -> None:
    """The summary is plain Python (the CLI must not import numpy); it equals numpy's definitions."""
    workload = synthetic_hpc(np.random.default_rng(3), jobs=997, nodes=64, arrival_rate=0.004)
    result = simulate(workload.jobs, Cluster.nodes(64), policy_from_conf("easy"))
    submit, start, end = (np.array([getattr(r, f) if f != "submit" else r.job.submit for r in result.records])
                          for f in ("submit", "start", "end"))
    wait, run = start - submit, end - start
    bsld = np.maximum(1.0, (wait + run) / np.maximum(run, 10.0))
    summary = summarize(result)
    for q in (50, 95):
        assert summary[f"wait/p{q}"] == np.percentile(wait, q)
    assert summary["bsld/p95"] == np.percentile(bsld, 95) and summary["bsld/max"] == bsld.max()
    assert job_table(result)["bsld"] == bsld.tolist()
    assert summary["wait/mean"] == pytest.approx(wait.mean(), rel=1e-12)
    assert summary["bsld/mean"] == pytest.approx(bsld.mean(), rel=1e-12)
    busy = float(sum(r.job.nodes * (r.end - r.start) for r in result.records))
    assert summary["util"] == pytest.approx(busy / (64 * (end.max() - submit.min())), rel=1e-12)


def test_replaying_a_trace_does_not_import_numpy(tmp_path: Path) -> None:
    """numpy's import is ~40 % of a whole CLI run on a 28k-job trace; the CLI path never needs it."""
    trace = tmp_path / "t.csv"
    trace.write_text("job_submit_time,num_nodes,time_limit\n0,5,10\n3,5,10\n")
    code = ("import sys; from sim.__main__ import main; main([sys.argv[1], '--nodes', '10', '--policy', 'easy']); "
            "print(sorted(m for m in ('numpy', 'sim.fairness', 'sim.workflows', 'sim.policies.fair_share') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(trace)], cwd=REPO, capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
