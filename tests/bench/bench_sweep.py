"""Sweep efficiency: ``experiment=bench`` (40 runs of about 1 s) run serially with schedlab's serial
launcher, then with the Ray launcher on this machine (it starts its own Ray), then on an existing
``ray start --head`` cluster (``hydra.launcher.address=HOST:PORT``). Each sweep is a fresh
``sweeps/run.py -m`` process in its own directory with its own SQLite MLflow store.

Reports the speedup over the serial sweep (end to end, and without Ray's start/stop) and the
per-run overhead of compose + Ray + MLflow: (slots × run phase − Σ simulation seconds) / runs, plus
compose and validation time per run. Writes ``sweep.json`` and ``sweep.md``.

    python tests/bench/bench_sweep.py --out bench-results [--runs 40] [--no-cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench._output import machine, write  # noqa: E402

RUN = REPO / "sweeps" / "run.py"
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
TARGETS = {"speedup": 1.7, "overhead_per_run": 0.15}


def sweep(cwd: Path, runs: int, *overrides: str) -> dict:
    """One sweep; its wall time, the launcher's phase timings and the runs' simulation seconds."""
    cmd = [sys.executable, str(RUN), "-m", "experiment=bench", f"replications={runs}", *overrides]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed: {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr[-3000:]}")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{cwd}/mlflow.db")
    exp = client.get_experiment_by_name("schedlab-bench")
    found = client.search_runs([exp.experiment_id], max_results=10_000)
    assert len(found) == runs and all(r.info.status == "FINISHED" for r in found), "missing runs"
    stats = [json.loads(p.read_text()) for p in cwd.glob("multirun/*/*/sweep-*.json")]
    return {"wall": wall, "sim_seconds": sum(r.data.metrics["sim/seconds"] for r in found),
            "timings": stats[0]["timings"] if stats else {}}


def ray_overheads(result: dict, runs: int) -> dict:
    t = result["timings"]
    busy = t["slots"] * t["runs"] - result["sim_seconds"]
    per_run = (t["compose"] + t["prepare"] + busy) / runs
    return {"overhead_per_run": per_run, "compose_per_run": (t["compose"] + t["prepare"]) / runs,
            "ray_start": t.get("ray_start", 0.0), "ray_stop": t.get("ray_stop", 0.0), "run_phase": t["runs"]}


def start_cluster(temp_dir: str, cpus: int) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray, "start", "--head", "--port", str(port), "--num-cpus", str(cpus), "--temp-dir", temp_dir,
                    "--include-dashboard=false", "--disable-usage-stats", "--object-store-memory", "200000000"],
                   env=ENV, check=True, capture_output=True)
    return f"127.0.0.1:{port}"


def stop_cluster(temp_dir: str) -> None:
    """Kill the processes of the cluster we started (they carry our temp dir), by pid."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if temp_dir.encode() in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--no-cluster", action="store_true", help="skip the existing-cluster measurement")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cpus = os.cpu_count() or 1
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        for name, overrides in [("serial launcher", ["hydra/launcher=serial"]),
                                ("ray local (starts Ray)", [])]:
            cwd = Path(tmp) / name.split()[0] / name.split()[1]
            cwd.mkdir(parents=True)
            print(f"running {name} …", flush=True)
            rows[name] = sweep(cwd, args.runs, *overrides)
        if not args.no_cluster:
            temp_dir = tempfile.mkdtemp(prefix="rb", dir="/tmp")
            try:
                address = start_cluster(temp_dir, cpus)
                cwd = Path(tmp) / "cluster"
                cwd.mkdir()
                print("running ray cluster (existing ray start --head) …", flush=True)
                rows["ray existing cluster"] = sweep(cwd, args.runs, f"hydra.launcher.address={address}")
            finally:
                stop_cluster(temp_dir)
    serial = rows["serial launcher"]
    report = {"meta": machine(cpus=cpus), "runs": args.runs,
              "targets": TARGETS, "results": {}}
    lines = [f"# Sweep efficiency: {args.runs} runs, {cpus} cores", "",
             "| launcher | wall s | Σ sim s | speedup | speedup w/o Ray start/stop | overhead/run s |",
             "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        entry = {"wall": round(r["wall"], 2), "sim_seconds": round(r["sim_seconds"], 2),
                 "speedup": round(serial["wall"] / r["wall"], 2)}
        if "slots" in r["timings"]:
            entry.update({k: round(v, 3) for k, v in ray_overheads(r, args.runs).items()})
            fixed = entry["ray_start"] + entry["ray_stop"]
            entry["speedup_without_ray_start_stop"] = round(serial["wall"] / (r["wall"] - fixed), 2)
        else:
            entry["overhead_per_run"] = round((r["wall"] - r["sim_seconds"]) / args.runs, 3)
        report["results"][name] = entry
        lines.append(f"| {name} | {entry['wall']} | {entry['sim_seconds']} | {entry['speedup']} | "
                     f"{entry.get('speedup_without_ray_start_stop', '-')} | {entry['overhead_per_run']} |")
    lines += ["", f"targets: speedup ≥ {TARGETS['speedup']}, overhead ≤ {TARGETS['overhead_per_run']} s/run "
              "(Ray rows: (slots × run phase − Σ sim s + compose) / runs; serial: (wall − Σ sim s) / runs)"]
    write(args.out, "sweep", report, "\n".join(lines), indent=1)


if __name__ == "__main__":
    main()
