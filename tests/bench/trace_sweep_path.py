"""The path of one run through the sweep layer, measured: the functions and modules of ``sweeps/`` and
``hydra_plugins/`` that a one-run sweep on the Ray launcher (a local instance) calls, on the driver and in
the Ray worker that runs it (``sys.setprofile`` in both; the worker's through Ray's
``worker_process_setup_hook``). Functions are ``file:qualname``; lambdas, comprehensions and module bodies
are left out. ``--repo PATH`` measures another checkout (e.g. a ``git worktree`` of an older commit).

    python tests/bench/trace_sweep_path.py [--repo PATH] [--out bench-results]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
SKIP = ("<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<module>")


def install() -> None:
    """Profile this process (not the sweep's heartbeat thread): every call into ``$TRACE_REPO``'s sweeps/ or
    hydra_plugins/, one line per new function, appended to ``$TRACE_OUT`` (a Ray worker is killed, not
    exited: nothing waits for its end)."""
    import threading

    repo, out = os.environ["TRACE_REPO"], os.environ["TRACE_OUT"]
    roots = tuple(os.path.join(repo, part) + os.sep for part in ("sweeps", "hydra_plugins"))
    seen: set[tuple[str, str]] = set()

    def profile(frame: object, event: str, arg: object) -> None:
        if event != "call" or threading.current_thread().name == "schedlab-heartbeat":  # not the run's path
            return
        code = frame.f_code  # type: ignore[attr-defined]
        if code.co_filename.startswith(roots) and code.co_name not in SKIP:
            key = (os.path.relpath(code.co_filename, repo), code.co_qualname)
            if key not in seen:
                seen.add(key)
                with open(out, "a") as handle:
                    handle.write(json.dumps([os.getpid(), *key]) + "\n")

    sys.setprofile(profile)


def trace(repo: Path) -> dict:
    """One one-run sweep of ``repo`` under the profiler: functions and modules, driver and worker."""
    with tempfile.TemporaryDirectory(prefix="trace-") as tmp:
        out = Path(tmp) / "calls.jsonl"
        env = {**os.environ, "TRACE_REPO": str(repo), "TRACE_OUT": str(out), "RAY_AUTH_MODE": "disabled",
               "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": f"{repo}{os.pathsep}{HERE.parent}"}
        driver = f"import sys, runpy; sys.path.insert(0, {str(HERE.parent)!r}); import trace_sweep_path as t; " \
                 f"t.install(); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
        args = [sys.executable, "-c", driver, str(repo / "sweeps" / "run.py"), "-m", "policy=easy", "seed=0",
                "cluster=hpc16", "workload.jobs=50", "hydra.launcher.progress=false",
                "hydra.launcher.local.object_store_memory=80000000",
                "+hydra.launcher.init.runtime_env.worker_process_setup_hook=trace_sweep_path.install",
                f"tracking.uri=sqlite:///{tmp}/mlflow.db", f"tracking.artifact_root={tmp}/a",
                f"hydra.sweep.dir={tmp}/multirun"]
        proc = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or "1 done" not in proc.stdout:
            raise SystemExit(f"the traced sweep failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    driver_pid = rows[0][0]  # the driver profiles from its start
    functions = sorted({(f, q) for _, f, q in rows})
    by_side = {"driver": sorted({(f, q) for p, f, q in rows if p == driver_pid}),
               "worker": sorted({(f, q) for p, f, q in rows if p != driver_pid})}
    return {"functions": len(functions), "modules": len({f for f, _ in functions}),
            "driver_functions": len(by_side["driver"]), "worker_functions": len(by_side["worker"]),
            "list": [f"{f}:{q}" for f, q in functions]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=HERE.parents[2])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = trace(args.repo.resolve())
    print(f"{result['functions']} functions in {result['modules']} modules "
          f"(driver {result['driver_functions']}, worker {result['worker_functions']})")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sweep_path.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
