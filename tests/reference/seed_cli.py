"""The seed's pseudocode as a whole program: ``python tests/reference/seed_cli.py TRACE.csv POLICY NODES``.

The whole-process baseline of ``make bench`` (``tests/bench/bench_sim.py``): it reads a DR_EVT
simple CSV with the standard library, schedules it with :mod:`tests.reference.seed_pseudocode`
and prints the job count and mean wait, as literally as the seed describes, nothing more.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.reference import seed_pseudocode


def main(trace: str, policy: str, nodes: str) -> None:
    with open(trace, newline="") as handle:
        rows = list(csv.DictReader(handle))
    jobs = [(i, float(r["job_submit_time"]), int(r["num_nodes"]), float(r["time_limit"]),
             float(r.get("actual_run_time") or r["time_limit"])) for i, r in enumerate(rows)]
    schedule = seed_pseudocode.run(policy, jobs, int(nodes))
    wait = sum(schedule[i][0] - submit for i, submit, *_ in jobs) / len(jobs)
    print(f"{len(schedule)} jobs, wait/mean {wait:.6g}")


if __name__ == "__main__":
    main(*sys.argv[1:])
