"""Env speed: :class:`sim.env.SchedulingEnv` decisions per second (each a ``step()`` handing control to the
engine's thread and back) beside the engine's own events per second (arrivals + completions) and scheduling
passes per second for FCFS, EASY and a :class:`~sim.policies.learned.NetPolicy` on the same jobs — 2,000
synthetic jobs on 128 nodes (``conf/``'s default workload), best of ``--repeats``. Writes ``env.json`` and
``env.md``.

    python tests/bench/bench_env.py --out bench-results
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sim import Cluster, simulate  # noqa: E402
from sim.env import SchedulingEnv  # noqa: E402
from sim.policies import policy_from_conf  # noqa: E402
from sim.policies.learned import KernelNet, NetPolicy  # noqa: E402
from sim.workloads import synthetic_hpc  # noqa: E402
from tests.bench._output import machine, write  # noqa: E402

JOBS, NODES, RATE, SEED = 2000, 128, 0.0012, 100


def episode(env: SchedulingEnv, agent: Any) -> tuple[int, float]:
    """Decisions of one episode of ``agent`` and its wall seconds (reset included)."""
    started = time.perf_counter()
    obs, info = env.reset(seed=SEED)
    steps, done = 0, False
    while not done:
        obs, _, done, _, info = env.step(agent(obs, info["action_mask"]))
        steps += 1
    return steps, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cluster = Cluster.nodes(NODES)
    workload = synthetic_hpc(np.random.default_rng(SEED), jobs=JOBS, nodes=NODES, arrival_rate=RATE)
    rows: list[dict[str, Any]] = []
    for backfill in ("none", "easy"):
        net = KernelNet.initial(np.random.default_rng(0), window=32, backfill=backfill)
        fixed = {"fcfs" if backfill == "none" else "easy": lambda obs, mask: 0 if mask[0] else len(mask) - 1}
        for agent_name, agent in {**fixed, "network": net.act}.items():
            env = SchedulingEnv(cluster, lambda rng: workload, window=32, backfill=backfill)
            best = min((episode(env, agent) for _ in range(args.repeats)), key=lambda r: r[1])
            rows.append({"kind": "env", "backfill": backfill, "agent": agent_name, "decisions": best[0],
                         "seconds": round(best[1], 4), "per_second": round(best[0] / best[1])})
    for name, make in {"fcfs": lambda: policy_from_conf("fcfs"), "easy": lambda: policy_from_conf("easy"),
                       "network (easy)": lambda: NetPolicy(KernelNet.initial(np.random.default_rng(0)))}.items():
        timings = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            result = simulate(workload.jobs, cluster, make(), check=False)
            timings.append(time.perf_counter() - started)
        seconds = min(timings)
        rows.append({"kind": "engine", "backfill": "", "agent": name, "events": 2 * JOBS, "passes": result.passes,
                     "seconds": round(seconds, 4), "per_second": round(2 * JOBS / seconds),
                     "passes_per_second": round(result.passes / seconds)})
    lines = [f"{JOBS} synthetic jobs on {NODES} nodes (seed {SEED}), best of {args.repeats}",
             "", "| what | backfill | agent / policy | count | s | per s |", "|---|---|---|---:|---:|---:|"]
    for row in rows:
        count = f"{row['decisions']} decisions" if row["kind"] == "env" else f"{row['events']} events"
        lines.append(f"| {row['kind']} | {row['backfill'] or '—'} | {row['agent']} | {count} | {row['seconds']} | "
                     f"{row['per_second']:,} |")
    write(args.out, "env", {"meta": machine(jobs=JOBS, nodes=NODES, seed=SEED), "results": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
