"""The DRF experiment end to end: ``sweeps/run.py`` logs it, ``analysis/report.py`` tables and plots it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

POLICIES = ["asset_fair", "cpu_fair", "drf", "drf_weighted", "fcfs_multi"]


def test_drf_compare_through_sweep_and_report(tmp_path: Path) -> None:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    sweep = subprocess.run(
        [sys.executable, str(REPO / "sweeps" / "run.py"), "-m", "experiment=drf_compare", "replications=2",
         "hydra/launcher=serial", "workload.users.A.tasks=60", "workload.users.B.tasks=60",
         "workload.users.C.tasks=60"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    out = tmp_path / "report"
    report = subprocess.run(
        [sys.executable, str(REPO / "analysis" / "report.py"), "--experiment", "schedlab-drf",
         "--metrics", "fairness/jain,util/cpu,wait/mean", "--baseline", "drf", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "10 finished runs" in report.stdout
    header = next(line for line in report.stdout.splitlines() if line.startswith("|") and "fairness/jain" in line)
    assert all(f"fairness/jain: {p}" in header for p in POLICIES)
    figure = out / "figures" / "dominant_shares.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "dominant_shares.png" in (out / "report.md").read_text()
