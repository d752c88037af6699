"""Multi-resource policy speed: tasks simulated per second for the five fair-share policies (and
``drf`` with ``strict=True``) on synthetic multi-user workloads (pooled and split clusters), plus
the literal full-scan DRF (``tests/test_fair_reference.py``) whose schedule must equal ``drf``'s.
Writes ``drf.json`` and ``drf.md`` into the ``--out`` directory and prints the table.

    python tests/bench/bench_drf.py --out bench-results [--tasks 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sim.core import Cluster, Job  # noqa: E402
from sim.engine import simulate  # noqa: E402
from sim.policies import policy_from_conf  # noqa: E402
from sim.workloads.multires import multires_cluster, multires_workload  # noqa: E402
from tests.bench._output import machine, write  # noqa: E402
from tests.bench.bench_sim import best_of  # noqa: E402
from tests.test_fair_invariants import NAMES  # noqa: E402
from tests.test_fair_reference import NaiveFairShare  # noqa: E402

SHAPES = ((1, 4, 0), (4, 1, 0), (2, 2, 0), (1, 1, 1), (3, 6, 0), (6, 2, 0), (1, 8, 0), (8, 1, 1))


def scenario(name: str, tasks: int, users: int, cluster: Cluster, load: float = 1.05) -> tuple[list[Job], dict]:
    """``tasks`` tasks of ``users`` users cycling through task shapes, at ``load`` × the busiest resource."""
    resources = cluster.resources
    def specs(rate: float) -> dict:
        return {f"u{k:02d}": {"demand": SHAPES[k % len(SHAPES)][: len(resources)], "tasks": tasks // users,
                              "duration": 60.0, "rate": rate, "spread": 0.5, "quantum": 0.5,
                              "weight": 1.0 + k % 3} for k in range(users)}
    probe = multires_workload(np.random.default_rng(0), users=specs(1.0), cluster=cluster).jobs
    span = max(j.submit for j in probe) - min(j.submit for j in probe)
    offered = max(sum(j.demand[r] * j.runtime for j in probe) / (total * span)
                  for r, total in enumerate(cluster.total))
    w = multires_workload(np.random.default_rng(1), users=specs(load / offered), cluster=cluster)
    return w.jobs, {"scenario": name, "tasks": len(w.jobs), "users": users, "resources": len(resources),
                    "machines": len(cluster.machines), "weights": w.weights}


def measure(jobs: list[Job], cluster: Cluster, meta: dict, repeats: int, naive: bool) -> list[dict]:
    weights = meta.pop("weights")
    factories = {name: (lambda n=name: policy_from_conf(n, **({"weights": weights} if n == "drf_weighted" else {})))
                 for name in NAMES}
    factories["drf strict"] = lambda: policy_from_conf("drf", strict=True)
    if naive:
        factories["drf (full scan)"] = lambda: NaiveFairShare()
    rows = []
    for name, factory in factories.items():
        seconds = best_of(repeats, lambda fac=factory: simulate(jobs, cluster, fac(), check=False))
        rows.append({**meta, "policy": name, "seconds": round(seconds, 4),
                     "tasks_per_second": round(len(jobs) / seconds)})
        print(f"  {meta['scenario']:<22} {name:<16} {seconds:8.3f} s", flush=True)
    if naive:
        fast = simulate(jobs, cluster, policy_from_conf("drf"), check=False).records
        slow = simulate(jobs, cluster, NaiveFairShare(), check=False).records
        if [r.start for r in fast] != [r.start for r in slow]:
            raise SystemExit(f"{meta['scenario']}: heap and full-scan DRF schedules differ")
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| scenario | users | resources | machines | tasks | policy | s | tasks/s |",
             "|---|---:|---:|---:|---:|---|---:|---:|"]
    lines += [f"| {r['scenario']} | {r['users']} | {r['resources']} | {r['machines']} | {r['tasks']} | "
              f"{r['policy']} | {r['seconds']} | {r['tasks_per_second']:,} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = [
        ("pooled, 4 users", 4, multires_cluster({"cpu": 256, "mem": 1024})),
        ("pooled, 64 users", 64, multires_cluster({"cpu": 256, "mem": 1024, "gpu": 32})),
        ("64 machines, 8 users", 8, multires_cluster({"cpu": 16, "mem": 64}, machines=64)),
    ]
    rows = []
    for name, users, cluster in runs:
        jobs, meta = scenario(name, args.tasks, users, cluster)
        rows += measure(jobs, cluster, meta, args.repeats, naive=True)
    write(args.out, "drf", {"meta": machine(), "results": rows}, table(rows))


if __name__ == "__main__":
    main()
