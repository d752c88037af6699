"""Command line: ``python -m sim TRACE --policy NAME [--nodes N] [--order sjf] [--out schedule.csv]``.

Simulates one trace with one policy, writes ``job_id,submit_time,start_time,end_time,nodes`` in
input order (``--out``) and prints the summary metrics. Bad input exits with status 2 and one
clear message naming the file, line and field.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

from sim.core import Cluster, InputError, SimulationResult
from sim.policies import POLICIES, make_policy
from sim.policies.queue_order import QUEUE_ORDERS
from sim.run import run
from sim.workloads import load_trace


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, help="SWF (.swf, .swf.gz), DR_EVT CSV or jobs CSV")
    parser.add_argument("--policy", required=True, choices=sorted(POLICIES), help="scheduling policy")
    parser.add_argument("--nodes", type=int, help="machine size (default: the SWF header's MaxNodes/MaxProcs)")
    parser.add_argument("--order", default="fcfs", choices=list(QUEUE_ORDERS), help="queue order")
    parser.add_argument("--format", dest="fmt", choices=["swf", "drevt_csv", "jobs_csv"], help="trace format")
    parser.add_argument("--kill-at-limit", action="store_true", help="end jobs at their time limit")
    parser.add_argument("--drop-oversized", action="store_true", help="skip jobs wider than the machine")
    parser.add_argument("--out", type=Path, help="write the schedule as CSV here")
    return parser


def write_schedule(result: SimulationResult, path: Path) -> None:
    """The schedule in input order; written to a temporary file and renamed (atomic)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["job_id", "submit_time", "start_time", "end_time", "nodes"])
        for r in result.records:
            writer.writerow([r.job.id, _number(r.job.submit), _number(r.start), _number(r.end), r.job.nodes])
    tmp.replace(path)


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        started = time.perf_counter()
        workload = load_trace(args.trace, args.fmt)
        parse_seconds = time.perf_counter() - started
        nodes = args.nodes or workload.default_nodes
        if not nodes:
            raise InputError(f"{args.trace}: machine size unknown (no MaxNodes/MaxProcs header); pass --nodes N")
        cluster = Cluster.nodes(nodes)
        started = time.perf_counter()
        done = run(workload, cluster, make_policy(args.policy, order=args.order),
                   kill_at_limit=args.kill_at_limit, drop_oversized=args.drop_oversized)
        sim_seconds = time.perf_counter() - started
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.out:
        write_schedule(done.result, args.out)
    print(f"{args.trace.name}: {len(done.result.records)} jobs on {nodes} nodes, policy {args.policy} "
          f"(order {args.order})")
    for key, count in sorted(done.notes.items()):
        print(f"  note: {key} = {count}")
    for key, value in done.summary.items():
        print(f"  {key:<16} {value:.6g}")
    print(f"  parse {parse_seconds:.3f} s, simulate {sim_seconds:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
