"""Command line: ``python -m sim TRACE --policy NAME [--nodes N] [--order sjf] [--out schedule.csv]``.

Simulates one trace with one policy, writes ``job_id,submit_time,start_time,end_time,nodes`` in
input order (``--out``) and prints the summary metrics. Bad input (a bad option, trace value or
``--out`` folder) exits with status 2 and one line naming the file, line and field or the option,
checked before simulating wherever it can be.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

from sim.core import Cluster, InputError, SimulationResult
from sim.engine import OversizedJobError
from sim.policies import POLICIES, make_policy
from sim.policies.queue_order import QUEUE_ORDERS
from sim.run import run
from sim.workloads import load_trace


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line, exit status 2 (argparse would print the usage first)."""
        self.exit(2, f"error: {message} (see python -m sim --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m sim", description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, help="SWF (.swf, .swf.gz), DR_EVT CSV or jobs CSV")
    parser.add_argument("--policy", required=True, choices=sorted(POLICIES), help="scheduling policy")
    parser.add_argument("--nodes", type=int, help="machine size (default: the SWF header's MaxNodes/MaxProcs)")
    parser.add_argument("--order", default="fcfs", choices=list(QUEUE_ORDERS), help="queue order")
    parser.add_argument("--format", dest="fmt", choices=["swf", "drevt_csv", "jobs_csv"], help="trace format")
    parser.add_argument("--kill-at-limit", action="store_true", help="end jobs at their time limit")
    parser.add_argument("--drop-oversized", action="store_true", help="skip jobs wider than the machine")
    parser.add_argument("--out", type=Path, help="write the schedule as CSV here")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """Option values that are wrong whatever the trace holds, so they fail before reading it."""
    if args.nodes is not None and args.nodes < 1:
        raise InputError(f"--nodes: expected a machine size ≥ 1, got {args.nodes}")
    if args.out is not None:
        folder = args.out.parent
        if args.out.is_dir():
            raise InputError(f"--out {args.out}: is a folder; give a file name such as {args.out / 'schedule.csv'}")
        if not folder.is_dir():
            raise InputError(f"--out {args.out}: folder {folder} does not exist (create it first)")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(f"--out {args.out}: folder {folder} is not writable")


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
        check_args(args)
        started = time.perf_counter()
        workload = load_trace(args.trace, args.fmt)
        parse_seconds = time.perf_counter() - started
        nodes = args.nodes if args.nodes is not None else workload.default_nodes
        if not nodes:
            raise InputError(f"{args.trace}: machine size unknown (no MaxNodes/MaxProcs header); pass --nodes N")
        cluster = Cluster.nodes(nodes)
        started = time.perf_counter()
        done = run(workload, cluster, make_policy(args.policy, order=args.order),
                   kill_at_limit=args.kill_at_limit, drop_oversized=args.drop_oversized)
        sim_seconds = time.perf_counter() - started
    except OversizedJobError as error:
        print(f"error: {error.describe(workload.source, workload.lines.get(error.job_id), '--drop-oversized')}",
              file=sys.stderr)
        return 2
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
