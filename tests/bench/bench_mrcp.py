"""MRCP-RM (CP-SAT) speed: the overhead O per job (model build + solve at each arrival) and the model
size per solve at λ = 0.01 and 0.025 on the MapReduce workload, m = 50, c_r = 2; RM-DCWF on the same
stream as the in-run baseline. The paper (seed 002, Java + CPLEX CP Optimizer) reports O = 0.043 s
and 2.9 s for MRCP-RM, 0.010 s and 0.110 s for RM-DCWF. Writes ``mrcp.json`` and ``mrcp.md`` into
``--out``.

    python tests/bench/bench_mrcp.py --out bench-results [--jobs 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sim.core import Cluster, PolicyStats  # noqa: E402
from sim.policies import policy_from_conf  # noqa: E402
from sim.run import run  # noqa: E402
from sweeps.specs import MapReduceStream  # noqa: E402
from tests.bench._output import machine, write  # noqa: E402

#: λ → the paper's O (s) for (rmdcwf, mrcp)
POINTS = {0.01: (0.010, 0.043), 0.025: (0.110, 2.9)}


def one_run(rate: float, jobs: int, policy: str, seed: int = 0) -> dict:
    """One MapReduce stream (conf defaults but ``jobs``); metrics, wall seconds and per-solve sizes."""
    cluster = Cluster.slotted(50, 2)
    workload = MapReduceStream(arrival_rate=rate, jobs=jobs, warmup=jobs // 10).build(np.random.default_rng(seed),
                                                                                      cluster)
    chosen = policy_from_conf(policy)
    seconds: list[float] = []  # each job's planning seconds, as the policy hands them over
    handed = chosen.workflow_done

    def workflow_done(workflow: int) -> PolicyStats:
        stats = handed(workflow)
        seconds.extend(stats.seconds_by_job.values())
        return stats

    chosen.workflow_done = workflow_done  # type: ignore[method-assign]
    started = time.perf_counter()
    done = run(workload, cluster, chosen)
    solves = getattr(chosen, "solves", [])
    return {"rate": rate, "policy": policy, "jobs": jobs, "O_s": done.summary["overhead/mean_s"],
            "O_max_s": max(seconds), "wall_s": time.perf_counter() - started, "P": done.summary["late/proportion"],
            "T": done.summary["turnaround/mean"], "util": done.summary["util"],
            "intervals_mean": statistics.fmean(s.intervals for s in solves) if solves else None,
            "intervals_max": max((s.intervals for s in solves), default=None),
            "constraints_mean": statistics.fmean(s.constraints for s in solves) if solves else None,
            "constraints_max": max((s.constraints for s in solves), default=None),
            "optimal": sum(s.status == "OPTIMAL" for s in solves) / len(solves) if solves else None,
            "fallbacks": done.summary.get("mrcp/fallbacks"),
            "wall_limit_hits": done.summary.get("mrcp/wall_limit_hits")}


def table(rows: list[dict]) -> str:
    lines = ["| λ | policy | jobs | O (s/job) | max O (s) | paper O (s) | intervals mean / max "
             "| constraints mean / max | optimal | fallbacks | wall limit hits | P (%) | T (s) | util | wall (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        paper = POINTS[r["rate"]][r["policy"] == "mrcp"]
        size = (f"{r['intervals_mean']:.0f} / {r['intervals_max']} | "
                f"{r['constraints_mean']:.0f} / {r['constraints_max']}" if r["intervals_mean"] is not None else "| ")
        solved = (f"{100 * r['optimal']:.0f} % | {r['fallbacks']:.0f} | {r['wall_limit_hits']:.0f}"
                  if r["optimal"] is not None else "| |")
        lines.append(f"| {r['rate']:g} | {r['policy']} | {r['jobs']} | {r['O_s']:.3f} | {r['O_max_s']:.2f} "
                     f"| {paper:g} | {size} | {solved} | {100 * r['P']:.2f} | {r['T']:.0f} | {r['util']:.3f} "
                     f"| {r['wall_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--jobs", type=int, default=60, help="jobs per run (60: a few minutes on 2 cores)")
    args = parser.parse_args()
    rows = []
    for rate in POINTS:
        for policy in ("rmdcwf", "mrcp"):
            rows.append(one_run(rate, args.jobs, policy))
            print(f"  λ={rate:g} {policy:<7} O {rows[-1]['O_s']:.3f} s  wall {rows[-1]['wall_s']:.0f} s", flush=True)
    meta = machine(max_deterministic_time=policy_from_conf("mrcp").config.max_deterministic_time)
    write(args.out, "mrcp", {"meta": meta, "results": rows}, table(rows))


if __name__ == "__main__":
    main()
