"""Sweep scale (issue 14): N tiny runs (``policy=easy seed=range(0,N) workload.jobs=20``, ~1 ms of
simulation each), with the Ray launcher and with the serial launcher (one run at a time in the driver) as the
baseline.

Per launcher and N: wall of the sweep, wall of a rerun with nothing to do (resume), marginal ms per
run (the slope of wall between the smallest and largest N), the driver's peak RSS (``VmHWM`` of the
``sweeps/run.py`` process, polled), time from the command to the first run's MLflow start time, and
how many cores one driver keeps busy with 1-s runs (1 s / marginal driver CPU per run, the driver's
own user + system seconds: on a loaded machine wall time mostly measures the other processes). Each sweep is a
fresh process in its own directory with its own SQLite store. ``--baseline REV`` runs every sweep also
from a ``git worktree`` of REV (alternating which goes first) and reports the ratio of the marginal
driver CPU per run. Writes ``sweep_scale.json`` and ``sweep_scale.md``.

    python tests/bench/bench_sweep_scale.py --out bench-results [--sizes 100 2000] [--huge]
        [--no-serial | --only ray|serial] [--baseline REV]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench._output import machine, write  # noqa: E402

ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
LAUNCHERS = {"ray": [], "serial": ["hydra/launcher=serial"]}


@dataclass
class Sweep:
    """One measured sweep command."""

    wall: float
    peak_rss_mb: float
    driver_cpu: float  # CPU seconds (user + system) of the driver process itself, not of Ray's
    first_start: float | None  # seconds from the command to the first run's start (None: nothing ran)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), MB; 0 once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used (``/proc/PID/stat``); 0 once it has gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_sweep(cwd: Path, n: int, launcher: str, tree: Path = REPO) -> Sweep:
    """Run the sweep in ``cwd`` with the code of ``tree``; its wall, the driver's peak RSS and when the first
    run started."""
    cmd = [sys.executable, str(tree / "sweeps" / "run.py"), "-m", "policy=easy", f"seed=range(0,{n})",
           "workload.jobs=20", *LAUNCHERS[launcher]]
    env = ENV if tree == REPO else {**ENV, "PYTHONPATH": str(tree)}  # its packages before this checkout's
    started_at, tic = time.time(), time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, cpu = [0.0], [0.0]

    def poll() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], peak_rss_mb(proc.pid))
            cpu[0] = max(cpu[0], cpu_seconds(proc.pid))
            time.sleep(0.1)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - tic
    watcher.join()
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed: {' '.join(cmd)}\n{out[-2000:]}\n{err[-3000:]}")
    return Sweep(wall=wall, peak_rss_mb=peak[0], driver_cpu=cpu[0], first_start=first_start(cwd, n, started_at))


def first_start(cwd: Path, n: int, since: float) -> float | None:
    """Seconds from ``since`` to the earliest run start recorded after it; checks all ``n`` runs exist."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{cwd}/mlflow.db")
    exp = client.get_experiment_by_name("schedlab-adhoc")
    found = client.search_runs([exp.experiment_id], max_results=50_000)
    assert len(found) == n and all(r.info.status == "FINISHED" for r in found), f"{len(found)} of {n} runs"
    starts = [r.info.start_time / 1000 for r in found if r.info.start_time / 1000 >= since]
    return min(starts) - since if starts else None


def measure(tmp: Path, launchers: list[str], sizes: list[int], trees: dict[str, Path]) -> dict[str, dict]:
    """Per tree, launcher and N: the sweep and its resume (trees alternate which runs first)."""
    results: dict[str, dict] = {name: {} for name in trees}
    for launcher in launchers:
        for i, n in enumerate(sizes):
            for name in list(trees) if i % 2 == 0 else list(reversed(trees)):
                cwd = tmp / f"{name}-{launcher}-{n}"
                cwd.mkdir()
                print(f"{name} {launcher} N={n} …", flush=True)
                sweep = run_sweep(cwd, n, launcher, trees[name])
                resume = run_sweep(cwd, n, launcher, trees[name])
                results[name].setdefault(launcher, {})[n] = {"sweep": asdict(sweep), "resume_wall": resume.wall,
                                                             "resume_driver_cpu": resume.driver_cpu}
    return results


def table(name: str, results: dict[str, dict[int, dict]]) -> list[str]:
    lines = []
    for launcher, by_n in results.items():
        lo, hi = min(by_n), max(by_n)

        def slope(value: Callable[[dict], float], lo: int = lo, hi: int = hi, by_n: dict = by_n) -> float | None:
            return (value(by_n[hi]) - value(by_n[lo])) / (hi - lo) if hi > lo else None

        marginal = slope(lambda r: r["sweep"]["wall"])
        cpu = slope(lambda r: r["sweep"]["driver_cpu"])
        for n, r in by_n.items():
            r["marginal_ms"] = round(1000 * marginal, 1) if marginal else None
            r["marginal_driver_cpu_ms"] = round(1000 * cpu, 1) if cpu else None
            r["cores_per_driver"] = round(1 / cpu) if cpu else None
            s = r["sweep"]
            lines.append(f"| {name} | {launcher} | {n} | {s['wall']:.1f} | {r['resume_wall']:.1f} | "
                         f"{s['peak_rss_mb']:.0f} | "
                         f"{s['first_start'] if s['first_start'] is None else round(s['first_start'], 1)} | "
                         f"{r['marginal_ms']} | {s['driver_cpu']:.1f} | {r['resume_driver_cpu']:.1f} | "
                         f"{r['marginal_driver_cpu_ms']} | {r['cores_per_driver']} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 2000])
    parser.add_argument("--huge", action="store_true", help="also N = 10,000 (tens of minutes)")
    parser.add_argument("--no-serial", action="store_true", help="skip the serial launcher")
    parser.add_argument("--only", choices=sorted(LAUNCHERS), help="one launcher only")
    parser.add_argument("--baseline", metavar="REV", help="also run every sweep from a git worktree of REV")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes) | ({10_000} if args.huge else set()))
    launchers = [k for k in LAUNCHERS if not (args.no_serial and k == "serial") and args.only in (None, k)]
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        trees = {"this tree": REPO}
        if args.baseline:
            trees[args.baseline] = Path(tmp) / "baseline"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(trees[args.baseline]),
                            args.baseline], check=True, capture_output=True)
        try:
            results = measure(Path(tmp), launchers, sizes, trees)
        finally:
            if args.baseline:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(trees[args.baseline])],
                               check=False, capture_output=True)
    lines = [f"# Sweep scale: tiny runs, {os.cpu_count()} cores", "",
             "| code | launcher | N | wall s | resume s | driver peak RSS MB | first run s | marginal ms/run "
             "| driver CPU s | resume driver CPU s | marginal driver CPU ms/run | cores/driver |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, by_launcher in results.items():
        lines += table(name, by_launcher)
    if args.baseline:
        for launcher in launchers:
            ours, base = (results[name][launcher][max(sizes)]["marginal_driver_cpu_ms"] for name in trees)
            if ours and base:
                lines.append(f"\n{launcher}: marginal driver CPU per run {base} ms ({args.baseline}) → {ours} ms "
                             f"(this tree): {base / ours:.2f}×")
    lines += ["", "marginal: (value at largest N − value at smallest N) / ΔN; driver CPU: user + system seconds of the "
              "driver process (robust to a loaded machine, unlike wall); cores/driver: 1 s / marginal driver CPU"]
    write(args.out, "sweep_scale", {"meta": machine(cpus=os.cpu_count()), "results": results}, "\n".join(lines),
          indent=1)


if __name__ == "__main__":
    main()
