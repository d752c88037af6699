"""Command line: ``python -m sim TRACE --policy NAME [--policy-option KEY=VALUE …] [--nodes N] [--out schedule.csv]``.

Simulates one trace with one policy, writes ``job_id,submit_time,start_time,end_time,nodes`` in
input order (``--out``) and prints the summary metrics. ``--policy`` is a ``conf/policy`` name
(``easy``, ``conservative_classic`` …) or any ``package.module:Class`` (or factory); each
``--policy-option KEY=VALUE`` sets one of its options, the value read as YAML (``3``, ``0.5``,
``null``, ``sjf``); ``--order NAME`` is short for ``--policy-option order=NAME``. A workflow-stream
file (``.json``, see :mod:`sim.workflows.files`) is replayed on its own m × c_r cluster with
``--policy rmdcwf`` (options ``--laxity-distribution``, ``--laxity``, ``--tsp``) or ``fifo_workflow``:
``--out`` gets one row per task (``job_id,task_id,resource,start,end,sub_deadline``), ``--jobs-out``
one per workflow (``job_id,arrival,earliest_start,deadline,completion,late``). Bad input (a bad
option, policy, trace value or ``--out`` folder) exits with status 2 and one line naming the file,
line and field or the option, checked before simulating wherever it can be; a policy that breaks
the engine's rules (overcommits, never starts a job, wakes up forever and starts nothing) exits with
status 1 and one line; Ctrl-C ends the run with ``interrupted`` and status 130 (128 + SIGINT, as a
shell reports it), no traceback and no partial ``--out`` file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from sim.core import Cluster, InputError, SimulationResult
from sim.engine import OversizedJobError, SchedulingError
from sim.invariants import InvariantViolation
from sim.policies import Policy, build_policy, policy_from_conf
from sim.policies.loading import policy_names
from sim.policies.queue_order import QUEUE_ORDERS
from sim.run import run
from sim.workloads import load_trace


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line, exit status 2 (argparse would print the usage first)."""
        self.exit(2, f"error: {message} (see python -m sim --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m sim", description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, help="SWF (.swf, .swf.gz), DR_EVT CSV, jobs CSV or workflow stream (.json)")
    parser.add_argument("--policy", required=True, metavar="NAME",
                        help=f"a conf/policy name ({', '.join(policy_names())}) or package.module:Class")
    parser.add_argument("--policy-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the policy, the value read as YAML (repeatable)")
    parser.add_argument("--nodes", type=int, help="machine size (default: the SWF header's MaxNodes/MaxProcs)")
    parser.add_argument("--order", metavar="NAME",
                        help=f"queue order ({' | '.join(QUEUE_ORDERS)}), short for --policy-option order=NAME")
    parser.add_argument("--format", dest="fmt", choices=["swf", "drevt_csv", "jobs_csv"], help="trace format")
    parser.add_argument("--kill-at-limit", action="store_true", help="end jobs at their time limit")
    parser.add_argument("--drop-oversized", action="store_true", help="skip jobs wider than the machine")
    parser.add_argument("--out", type=Path, help="write the schedule as CSV here")
    stream = parser.add_argument_group("workflow streams (.json)")
    stream.add_argument("--laxity-distribution", choices=["pd", "ed"], help="rmdcwf: laxity per phase (default pd)")
    stream.add_argument("--laxity", choices=["sl", "tl"], help="rmdcwf: SET alone or on the live plan (default sl)")
    stream.add_argument("--tsp", choices=["tsp1", "tsp2"], help="rmdcwf: earliest or latest start (default tsp1)")
    stream.add_argument("--warmup", type=int, default=0, help="leading workflows left out of the metrics")
    stream.add_argument("--jobs-out", type=Path, help="write one row per workflow as CSV here")
    return parser


STREAM_OPTIONS = ("laxity_distribution", "laxity", "tsp")


def policy_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--policy-option`` pairs, then ``--order`` and the workflow-stream flags, as keyword options."""
    options: dict[str, Any] = {}
    for pair in args.policy_option:
        key, sep, text = pair.partition("=")
        if not sep or not key.isidentifier():
            raise InputError(f"--policy-option {pair!r}: expected KEY=VALUE, e.g. order=sjf")
        try:
            options[key] = yaml.safe_load(text)
        except yaml.YAMLError:
            raise InputError(f"--policy-option {pair!r}: {text!r} is not a YAML value") from None
    for key in ("order", *STREAM_OPTIONS):
        value = getattr(args, key)
        if value is not None:
            if key in options:
                raise InputError(f"--{key.replace('_', '-')}: {key} is also given by --policy-option")
            options[key] = value
    return options


def make_policy(policy: str, options: dict[str, Any]) -> Policy:
    """``--policy``: a conf/policy file's name, or (with a dot or colon) a ``package.module:Class``."""
    if "." in policy or ":" in policy:
        return build_policy(policy, options)
    return policy_from_conf(policy, **options)


def describe(policy: str, options: dict[str, Any]) -> str:
    """``policy easy order=sjf``: the policy and the options given on the command line."""
    return " ".join([f"policy {policy}", *(f"{k}={v}" for k, v in options.items())])


def is_stream(path: Path) -> bool:
    """Whether ``path`` names a workflow-stream file rather than a job trace."""
    return path.name.lower().endswith(".json")


def check_args(args: argparse.Namespace) -> None:
    """Option values that are wrong whatever the trace holds, so they fail before reading it."""
    if args.nodes is not None and args.nodes < 1:
        raise InputError(f"--nodes: expected a machine size ≥ 1, got {args.nodes}")
    stream = is_stream(args.trace)
    if stream and args.nodes is not None:
        raise InputError("--nodes: a workflow stream runs on the m × c_r cluster its file names")
    if not stream:
        given = [f"--{o.replace('_', '-')}" for o in STREAM_OPTIONS if getattr(args, o) is not None]
        if given or args.jobs_out is not None:
            raise InputError(f"{(given or ['--jobs-out'])[0]}: only for workflow streams (.json files)")
    for flag, path in (("--out", args.out), ("--jobs-out", args.jobs_out)):
        if path is not None:
            _check_writable(flag, path)


def _check_writable(flag: str, path: Path) -> None:
    folder = path.parent
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a folder; give a file name such as {path / 'schedule.csv'}")
    if not folder.is_dir():
        raise InputError(f"{flag} {path}: folder {folder} does not exist (create it first)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: folder {folder} is not writable")


def write_schedule(result: SimulationResult, path: Path) -> None:
    """The schedule in input order, written atomically (:func:`sim.tables.csv_rows`)."""
    from sim.tables import csv_rows

    with csv_rows(path, ["job_id", "submit_time", "start_time", "end_time", "nodes"]) as write:
        for r in result.records:
            write([r.job.id, r.job.submit, r.start, r.end, r.job.nodes])


def replay_stream(args: argparse.Namespace, policy: Policy, described: str) -> int:
    """The workflow-stream mode of :func:`main` (see the module docstring); the task rows are written
    to ``--out`` as the run produces them."""
    from sim.tables import csv_rows, write_csv
    from sim.workflows.files import read_stream
    from sim.workflows.metrics import TASK_COLUMNS

    try:
        started = time.perf_counter()
        workload, m, c_r = read_stream(args.trace, warmup=args.warmup)
        parse_seconds = time.perf_counter() - started
        with contextlib.ExitStack() as stack:
            tasks = stack.enter_context(csv_rows(args.out, TASK_COLUMNS)) if args.out else None
            started = time.perf_counter()
            done = run(workload, Cluster.slotted(m, c_r), policy, tasks=tasks)
            sim_seconds = time.perf_counter() - started
    except InputError as error:
        return _fail(error, 2)
    except (SchedulingError, InvariantViolation) as error:
        return _fail(error, 1)
    if args.jobs_out:
        write_csv(done.tables["workflows"], args.jobs_out)
    workflows = tuple(workload.workflows)
    print(f"{args.trace.name}: {len(workflows)} workflows ({sum(len(wf.tasks) for wf in workflows)} tasks) on "
          f"m={m} × c_r={c_r}, {described}")
    _print_summary(done.summary, parse_seconds, sim_seconds)
    return 0


def _fail(error: Exception | str, status: int) -> int:
    """One line on stderr; the exit status."""
    print(f"error: {error}", file=sys.stderr)
    return status


def _print_summary(summary: dict[str, float], parse_seconds: float, sim_seconds: float) -> None:
    for key, value in summary.items():
        print(f"  {key:<16} {value:.6g}")
    print(f"  parse {parse_seconds:.3f} s, simulate {sim_seconds:.3f} s")


def main(argv: list[str] | None = None) -> int:
    """Run the command line (see the module docstring); the exit status."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_args(args)
        options = policy_options(args)
        policy = make_policy(args.policy, options)
    except InputError as error:
        return _fail(error, 2)
    described = describe(args.policy, options)
    if is_stream(args.trace):
        return replay_stream(args, policy, described)
    try:
        started = time.perf_counter()
        workload = load_trace(args.trace, args.fmt)
        parse_seconds = time.perf_counter() - started
        nodes = args.nodes if args.nodes is not None else workload.default_nodes
        if not nodes:
            raise InputError(f"{args.trace}: machine size unknown (no MaxNodes/MaxProcs header); pass --nodes N")
        cluster = Cluster.nodes(nodes)
        started = time.perf_counter()
        done = run(workload, cluster, policy, kill_at_limit=args.kill_at_limit, drop_oversized=args.drop_oversized)
        sim_seconds = time.perf_counter() - started
    except OversizedJobError as error:
        return _fail(error.describe(workload.source, workload.lines.get(error.job_id), "--drop-oversized"), 2)
    except InputError as error:
        return _fail(error, 2)
    except (SchedulingError, InvariantViolation) as error:
        return _fail(error, 1)
    if args.out:
        write_schedule(done.result, args.out)
    print(f"{args.trace.name}: {len(done.result.records)} jobs on {nodes} nodes, {described}")
    for key, count in sorted(done.notes.items()):
        print(f"  note: {key} = {count}")
    _print_summary(done.summary, parse_seconds, sim_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
