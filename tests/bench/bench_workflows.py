"""RM-DCWF speed and memory: the planning overhead O per workflow, a whole 2,000-workflow run's wall
time, O of every configuration and the peak memory of long runs. Targets (issue #8, this 2-core
machine): O ≤ 5 ms at the LIGO defaults (the paper's Java: ~9 ms) and ≤ 30 ms at λ = 1/150 (paper:
17 ms); a 2,000-job LIGO run ≤ 20 s; peak RSS of a 50,000-workflow run ≤ 1.3 × a 5,000-workflow
run's (issue #27 B7: memory follows the unfinished workflows). ``fifo_workflow`` on the same stream
is the in-run baseline (its time is mapping alone, no budgeting or remapping), so the ratio column
is robust to a noisy machine. Sections (``--only``, repeatable; default all): ``points`` (O and
wall at three load points), ``overhead`` (O of the eight RM-DCWF configurations and FIFO at the LIGO
default, ``--overhead-jobs`` workflows), ``rss`` (peak RSS of a fresh process per ``--rss`` size),
``calendar`` (issue #27 B6: the simulation's seconds at the CyberShake default point, 2,000
workflows, with main c300018's slot calendar — ``tests/reference/calendar_c300018.py`` — and with
the current one, on one stream built beforehand; target ≥ 3× for ``fifo_workflow`` and PD-SL-TSP1,
every ``tasks.csv`` byte-identical), ``commit`` (the same point, the whole simulator at this tree
against a ``git worktree`` of c300018, fresh interpreters). Writes ``workflows.json`` and
``workflows.md`` into ``--out``.

    python tests/bench/bench_workflows.py --out bench-results [--jobs 2000] [--rss 5000 50000] [--only rss]
    python tests/bench/bench_workflows.py --out bench-results --only calendar [--calendar-repeats 2]
"""

from __future__ import annotations

import argparse
import gc
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sim.core import Cluster  # noqa: E402
from sim.policies import policy_from_conf  # noqa: E402
from sim.run import run  # noqa: E402
from sweeps.specs import WorkflowStream  # noqa: E402
from tests import calendar_swap as swap  # noqa: E402
from tests.bench._output import machine, write  # noqa: E402
from tests.calendar_swap import CONFIGS  # noqa: E402  (FIFO and the eight RM-DCWF configurations)

#: (label, workload type, λ) — the paper's LIGO default and high-load points, Genome's default
POINTS = (("LIGO default", "ligo", 1 / 180), ("LIGO λ=1/150", "ligo", 1 / 150), ("Genome default", "genome", 1 / 2290))
TARGET_O = {"LIGO default": 0.005, "LIGO λ=1/150": 0.030}
TARGET_RSS_RATIO = 1.3  # peak RSS of the largest --rss size over the smallest's
SECTIONS = ("points", "overhead", "rss", "calendar", "commit")
#: the commit section: the whole simulator at this commit against a checkout of it (git worktree)
BASE_COMMIT = "c300018"
#: one timed run in a fresh interpreter on a given checkout: the stream built whole first (not timed;
#: c300018 builds it eagerly), then ``run`` of a fresh policy; prints seconds, P and T as JSON
_TIMED = """
import dataclasses, json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from sim.core import Cluster
from sim.run import run
from sweeps.specs import WorkflowStream
try:
    from sim.policies import policy_from_conf as make
except ImportError:  # c300018 names it make_policy
    from sim.policies import make_policy as make
kind, rate, jobs, name = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
options = dict(a.split("=") for a in sys.argv[6:])
cluster = Cluster.slotted(50, 2)
workload = WorkflowStream(type=kind, arrival_rate=rate, jobs=jobs, warmup=jobs // 10).build(
    np.random.default_rng(0), cluster)
workload = dataclasses.replace(workload, workflows=tuple(workload.workflows))
started = time.perf_counter()
done = run(workload, cluster, make(name, **options))
print(json.dumps({"s": time.perf_counter() - started, "P": done.summary["late/proportion"],
                  "T": done.summary["turnaround/mean"]}))
"""
#: label → (policy, options, options on c300018): the new rules' defaults, and the old rules named
#: on this commit so both checkouts plan the same way
COMMIT_CONFIGS = {"fifo_workflow": ("fifo_workflow", [], []), "PD-SL-TSP1": ("rmdcwf", [], []),
                  "ED-SL-TSP2 (earlier rules)": ("rmdcwf", ["laxity_distribution=ed", "tsp=tsp2",
                                                            "multi_parent=latest_start", "late_rule=planned"],
                                                 ["laxity_distribution=ed", "tsp=tsp2"])}
#: the calendar section: CyberShake's default point, the configurations timed and the speed-up targets
CALENDAR_POINT = ("CyberShake default", "cybershake", 1 / 22)
CALENDAR_CONFIGS = ("fifo_workflow", "PD-SL-TSP1", "ED-SL-TSP2")
CALENDAR_TARGET = {"fifo_workflow": 3.0, "PD-SL-TSP1": 3.0}


def one_run(kind: str, rate: float, jobs: int, policy: str, seed: int = 0, **options: str) -> dict:
    """Simulate one stream on m = 50, c_r = 2; metrics plus wall seconds (the stream is built as the run goes)."""
    cluster = Cluster.slotted(50, 2)
    spec = WorkflowStream(type=kind, arrival_rate=rate, jobs=jobs, warmup=jobs // 10)
    workload = spec.build(np.random.default_rng(seed), cluster)
    started = time.perf_counter()
    done = run(workload, cluster, policy_from_conf(policy, **options))
    return {**done.summary, "wall_s": time.perf_counter() - started}


def overhead_rows(jobs: int) -> list[dict]:
    """O (and P, T, wall) of every configuration of :data:`CONFIGS` on one LIGO-default stream of ``jobs``."""
    rows = []
    for label, (policy, options) in CONFIGS.items():
        res = one_run("ligo", 1 / 180, jobs, policy, **options)
        rows.append({"config": label, "jobs": jobs, "O_ms": 1e3 * res["overhead/mean_s"], "wall_s": res["wall_s"],
                     "P": res["late/proportion"], "T": res["turnaround/mean"]})
        print(f"  overhead {label:<14} O {rows[-1]['O_ms']:.2f} ms  wall {res['wall_s']:.1f} s", flush=True)
    return rows


def rss_rows(sizes: list[int]) -> list[dict]:
    """Peak RSS of a LIGO-default rmdcwf run per size (a fresh process each) and its ratio to the smallest's."""
    rows = [{"jobs": jobs, "rss_mb": long_run_rss(jobs)} for jobs in sorted(sizes)]
    for row in rows:
        row["ratio"] = row["rss_mb"] / rows[0]["rss_mb"]
        print(f"  rss {row['jobs']} workflows: peak RSS {row['rss_mb']:.0f} MB ({row['ratio']:.2f}×)", flush=True)
    return rows


def long_run_rss(jobs: int) -> float:
    """Peak RSS (MB) of a fresh process that builds and runs a ``jobs``-workflow LIGO stream."""
    code = (f"import sys, resource; sys.path.insert(0, {str(REPO)!r}); "
            f"from tests.bench.bench_workflows import one_run; one_run('ligo', 1/180, {jobs}, 'rmdcwf'); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1]) / 1024


def points(jobs: int) -> list[dict]:
    """O, wall, P, T and util of fifo_workflow and rmdcwf at each of :data:`POINTS` (``jobs`` workflows)."""
    rows = []
    for label, kind, rate in POINTS:
        fifo = one_run(kind, rate, jobs, "fifo_workflow")
        for policy, res in (("fifo_workflow", fifo), ("rmdcwf", one_run(kind, rate, jobs, "rmdcwf"))):
            rows.append({"point": label, "policy": policy, "jobs": jobs, "O_ms": 1e3 * res["overhead/mean_s"],
                         "O_ratio": res["overhead/mean_s"] / fifo["overhead/mean_s"], "wall_s": res["wall_s"],
                         "P": res["late/proportion"], "T": res["turnaround/mean"], "util": res["util"]})
            print(f"  {label:<16} {policy:<14} O {rows[-1]['O_ms']:.2f} ms  wall {res['wall_s']:.1f} s", flush=True)
    return rows


def calendar_rows(jobs: int, repeats: int) -> list[dict]:
    """Seconds of ``sim.run.run`` (best of ``repeats``, old and new calendar alternating which goes
    first) for each of :data:`CALENDAR_CONFIGS` on one stream (seed 0, warm-up ``jobs // 10``) built
    once beforehand, with main c300018's calendar and with the current one; every run's tasks.csv
    hashed (SHA-256 of the bytes ``sim.tables.write_csv`` writes)."""
    label, kind, rate = CALENDAR_POINT
    started = time.perf_counter()
    workload, cluster = swap.stream(kind, rate, jobs, seed=0)
    print(f"  calendar: {label} stream of {jobs} workflows built in {time.perf_counter() - started:.1f} s", flush=True)
    rows = []
    for config in CALENDAR_CONFIGS:
        wall: dict[str, list[float]] = {name: [] for name in swap.CALENDARS}
        cpu: dict[str, list[float]] = {name: [] for name in swap.CALENDARS}
        digests, tasks_rows, remaps = set(), 0, 0.0
        for repeat in range(repeats):
            for name in ("c300018", "current") if repeat % 2 == 0 else ("current", "c300018"):
                gc.collect()
                started, cpu_started = time.perf_counter(), time.process_time()
                done, tasks = swap.run_with(swap.CALENDARS[name], workload, cluster, lambda c=config: swap.policy(c))
                wall[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - cpu_started)
                digests.add(swap.digest(tasks))
                tasks_rows, remaps = len(tasks["job_id"]), done.summary.get("remap/attempts", 0.0)
                print(f"  calendar {config:<14} {name:<8} {wall[name][-1]:.2f} s  tasks.csv {swap.digest(tasks)}",
                      flush=True)
        old, new = min(wall["c300018"]), min(wall["current"])
        rows.append({"point": label, "config": config, "jobs": jobs, "repeats": repeats, "old_s": old, "new_s": new,
                     "ratio": old / new, "cpu_ratio": min(cpu["c300018"]) / min(cpu["current"]),
                     "target": CALENDAR_TARGET.get(config), "identical": len(digests) == 1,
                     "tasks_sha256": sorted(digests), "tasks": tasks_rows, "remap_attempts": remaps})
    return rows


def commit_rows(jobs: int, repeats: int) -> list[dict]:
    """The simulation's seconds (best of ``repeats``, alternating which checkout goes first) at the
    CyberShake default point, ``jobs`` workflows, seed 0, of this tree's simulator and of a
    ``git worktree`` of :data:`BASE_COMMIT`, each in a fresh interpreter; P and T beside them (equal
    for FIFO and the earlier rules: the speed-ups changed no schedule)."""
    import json
    import tempfile

    _, kind, rate = CALENDAR_POINT
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder) / BASE_COMMIT
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), BASE_COMMIT], check=True,
                       capture_output=True)
        try:
            for config, (name, options, base_options) in COMMIT_CONFIGS.items():
                seconds: dict[str, list[float]] = {"base": [], "head": []}
                found: dict[str, dict] = {}
                for repeat in range(repeats):
                    for side in ("base", "head") if repeat % 2 == 0 else ("head", "base"):
                        tree, opts = (base, base_options) if side == "base" else (REPO, options)
                        out = subprocess.run([sys.executable, "-c", _TIMED, str(tree), kind, str(rate), str(jobs), name,
                                              *opts], check=True, capture_output=True, text=True).stdout
                        found[side] = json.loads(out.splitlines()[-1])
                        seconds[side].append(found[side]["s"])
                        print(f"  commit {config:<28} {side} {seconds[side][-1]:.2f} s", flush=True)
                old, new = min(seconds["base"]), min(seconds["head"])
                rows.append({"config": config, "jobs": jobs, "base_s": old, "head_s": new, "ratio": old / new,
                             "base_P": found["base"]["P"], "head_P": found["head"]["P"],
                             "base_T": found["base"]["T"], "head_T": found["head"]["T"]})
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False,
                           capture_output=True)
    return rows


def commit_table(rows: list[dict]) -> str:
    lines = [f"| whole simulator vs {BASE_COMMIT} (CyberShake default, {rows[0]['jobs']:,} workflows) | "
             f"{BASE_COMMIT} (s) | this tree (s) | speed-up | P, T ({BASE_COMMIT}) | P, T (this tree) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['config']} | {r['base_s']:.2f} | {r['head_s']:.2f} | {r['ratio']:.2f}× | "
              f"{100 * r['base_P']:.2f} %, {r['base_T']:.1f} s | {100 * r['head_P']:.2f} %, {r['head_T']:.1f} s |"
              for r in rows]
    return "\n".join(lines)


def calendar_table(rows: list[dict]) -> str:
    lines = [f"| calendar speed-up vs c300018 ({rows[0]['point']}, {rows[0]['jobs']:,} workflows) | old (s) | "
             "new (s) | speed-up | CPU speed-up | target | tasks.csv identical |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        target = f"≥ {r['target']:g}×" if r["target"] else ""
        lines.append(f"| {r['config']} | {r['old_s']:.2f} | {r['new_s']:.2f} | {r['ratio']:.2f}× | "
                     f"{r['cpu_ratio']:.2f}× | {target} | {'yes' if r['identical'] else 'NO'} |")
    return "\n".join(lines)


def table(rows: list[dict]) -> str:
    lines = ["| point | policy | jobs | O (ms/job) | ratio to fifo | wall (s) | P (%) | T (s) | util | target O |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        target = f"≤ {TARGET_O[r['point']] * 1e3:g} ms" if r["point"] in TARGET_O and r["policy"] == "rmdcwf" else ""
        lines.append(f"| {r['point']} | {r['policy']} | {r['jobs']} | {r['O_ms']:.2f} | {r['O_ratio']:.2f} | "
                     f"{r['wall_s']:.1f} | {100 * r['P']:.2f} | {r['T']:.0f} | {r['util']:.3f} | {target} |")
    return "\n".join(lines)


def overhead_table(rows: list[dict]) -> str:
    lines = ["| configuration (LIGO default) | jobs | O (ms/job) | wall (s) | P (%) | T (s) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['config']} | {r['jobs']} | {r['O_ms']:.2f} | {r['wall_s']:.1f} | {100 * r['P']:.2f} | "
              f"{r['T']:.0f} |" for r in rows]
    return "\n".join(lines)


def rss_table(rows: list[dict]) -> str:
    lines = [f"| long run (LIGO default, rmdcwf) | peak RSS (MB) | ratio to {rows[0]['jobs']:,} | target |",
             "|---|---|---|---|"]
    lines += [f"| {r['jobs']:,} workflows | {r['rss_mb']:.0f} | {r['ratio']:.2f} | "
              f"{f'≤ {TARGET_RSS_RATIO:g}' if r is rows[-1] and len(rows) > 1 else ''} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--only", action="append", choices=SECTIONS, help="run only this section (repeatable)")
    parser.add_argument("--jobs", type=int, default=2000, help="workflows per run of the points section")
    parser.add_argument("--overhead-jobs", type=int, default=1000, help="workflows per run of the overhead section")
    parser.add_argument("--rss", type=int, nargs="+", default=[5000, 50000], help="workflows of the rss section's runs")
    parser.add_argument("--calendar-jobs", type=int, default=2000, help="workflows of the calendar section's stream")
    parser.add_argument("--calendar-repeats", type=int, default=2, help="timed runs per calendar and configuration")
    args = parser.parse_args()
    only = set(args.only or SECTIONS)
    body: dict = {"meta": {}}
    tables = []
    if "points" in only:
        body["results"] = points(args.jobs)
        tables.append(table(body["results"]))
    if "overhead" in only:
        body["overhead"] = overhead_rows(args.overhead_jobs)
        tables.append(overhead_table(body["overhead"]))
    if "rss" in only:
        body["rss"] = rss_rows(args.rss)
        tables.append(rss_table(body["rss"]))
    if "calendar" in only:
        body["calendar"] = calendar_rows(args.calendar_jobs, args.calendar_repeats)
        tables.append(calendar_table(body["calendar"]))
    if "commit" in only:
        body["commit"] = commit_rows(args.calendar_jobs, args.calendar_repeats)
        tables.append(commit_table(body["commit"]))
    body["meta"] = machine(bench_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    write(args.out, "workflows", body, "\n\n".join(tables))
    for r in body.get("results", []):
        if r["policy"] == "rmdcwf" and r["point"] in TARGET_O and r["O_ms"] / 1e3 > TARGET_O[r["point"]]:
            print(f"MISSED TARGET: {r['point']} O {r['O_ms']:.2f} ms > {TARGET_O[r['point']] * 1e3:g} ms")
    ligo = next((r for r in body.get("results", []) if r["point"] == "LIGO default" and r["policy"] == "rmdcwf"), None)
    if ligo is not None and args.jobs == 2000 and ligo["wall_s"] > 20:
        print(f"MISSED TARGET: 2,000-job LIGO run {ligo['wall_s']:.1f} s > 20 s")
    for r in body.get("calendar", []):
        if not r["identical"]:
            print(f"MISSED TARGET: {r['config']}: the two calendars wrote different tasks.csv ({r['tasks_sha256']})")
        if r["target"] and r["ratio"] < r["target"]:
            print(f"MISSED TARGET: {r['config']} with the current calendar {r['ratio']:.2f}× as fast as with "
                  f"c300018's < {r['target']:g}×")
    rss = body.get("rss", [])
    if len(rss) > 1 and rss[-1]["ratio"] > TARGET_RSS_RATIO:
        print(f"MISSED TARGET: peak RSS at {rss[-1]['jobs']:,} workflows is {rss[-1]['ratio']:.2f}× the "
              f"{rss[0]['jobs']:,}-workflow run's > {TARGET_RSS_RATIO:g}×")


if __name__ == "__main__":
    main()
