"""`make paper` on a `ray start` cluster: the same command on 1 node and on 2 nodes (issue 12).

Starts a Ray cluster with ``ray start --head`` (and, for the second measurement, a second node with
``ray start --address``), one CPU per node, on loopback; runs ``sweeps/paper.py`` with
``RAY_ADDRESS`` pointing at it in a fresh directory (its own SQLite store, so nothing is skipped); stops
the cluster. The two sizes alternate (1, 2, 1, 2 … for ``--repeats``) so background load hits both
alike; speed-up = the best wall on 1 node / the best wall on 2 nodes. Both nodes share this machine's cores: on a
2-core machine the 2-node cluster has twice the CPUs of the 1-node one, so the ratio says how well the
sweep path spreads one command over nodes, not what a second machine would add. Writes
``paper_cluster.json`` and ``paper_cluster.md``.

    python tests/bench/bench_paper_cluster.py --out bench-results [--repeats 2] [--only paper_genome_m] [OVERRIDE ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAPER = REPO / "sweeps" / "paper.py"
RAY = str(Path(sys.executable).parent / "ray")
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
NODE = ["--num-cpus", "1", "--object-store-memory", "80000000", "--disable-usage-stats"]
DEFAULT_OVERRIDES = ["replications=2", "workload.jobs=500", "workload.warmup=50"]


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def ray_cluster(nodes: int) -> Iterator[str]:
    """A ``ray start`` cluster of ``nodes`` one-CPU nodes on loopback; its address. Killed afterwards."""
    temp_dir = tempfile.mkdtemp(prefix="rb", dir="/tmp")  # short: Ray's socket paths must stay short
    port = free_port()
    address = f"127.0.0.1:{port}"
    try:
        subprocess.run([RAY, "start", "--head", "--port", str(port), "--include-dashboard=false",
                        "--temp-dir", temp_dir, *NODE], env=ENV, check=True, capture_output=True, timeout=120)
        for _ in range(nodes - 1):
            subprocess.run([RAY, "start", "--address", address, *NODE], env=ENV, check=True,
                           capture_output=True, timeout=120)
        yield address
    finally:
        for proc in Path("/proc").iterdir():  # ours alone: their command lines carry our temp dir
            with contextlib.suppress(OSError, ValueError):
                if temp_dir in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    os.kill(int(proc.name), signal.SIGKILL)


def paper_wall(nodes: int, only: str, overrides: list[str]) -> dict[str, float | int]:
    """Wall seconds of ``sweeps/paper.py --only ONLY OVERRIDES`` on a fresh ``nodes``-node cluster."""
    with ray_cluster(nodes) as address, tempfile.TemporaryDirectory(prefix="bench-paper-") as cwd:
        cmd = [sys.executable, str(PAPER), "--only", only, *overrides]
        tic = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env={**ENV, "RAY_ADDRESS": address}, capture_output=True, text=True)
        wall = time.perf_counter() - tic
        if proc.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed on {nodes} node(s):\n"
                             f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        done = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if " done, " in line]
        return {"nodes": nodes, "wall_s": round(wall, 1), "summary": done[-1].strip() if done else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--only", default="paper_genome_m", help="paper experiment(s) to run (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per cluster size (default: %(default)s)")
    parser.add_argument("overrides", nargs="*", help=f"Hydra overrides (default: {' '.join(DEFAULT_OVERRIDES)})")
    args = parser.parse_args()
    overrides = args.overrides or DEFAULT_OVERRIDES
    rows = [paper_wall(n, args.only, overrides) for _ in range(args.repeats) for n in (1, 2)]
    best = {n: min(r["wall_s"] for r in rows if r["nodes"] == n) for n in (1, 2)}
    speedup = best[1] / best[2]
    command = f"sweeps/paper.py --only {args.only} {' '.join(overrides)}"
    lines = [f"# make paper on a ray start cluster ({os.cpu_count()} cores on this machine, 1 CPU per node)", "",
             f"command: `RAY_ADDRESS=… python {command}`", "",
             "| nodes | wall s | sweep summary |", "|---|---|---|",
             *(f"| {r['nodes']} | {r['wall_s']} | {r['summary']} |" for r in rows),
             "", f"best wall: 1 node {best[1]} s, 2 nodes {best[2]} s; speed-up 2 nodes vs 1: {speedup:.2f}×"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "paper_cluster.json").write_text(json.dumps({"command": command, "runs": rows,
                                                             "speedup": round(speedup, 2)}, indent=1))
    (args.out / "paper_cluster.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
