"""The path of one run through the sweep layer, measured: the functions and modules of ``sweeps/`` and
``hydra_plugins/`` that a run passes through on the Ray launcher (a local instance), on the driver and in the
Ray worker that runs it (``sys.setprofile`` in both; the worker's through Ray's ``worker_process_setup_hook``):
those called more often in a 3-run sweep than in a 1-run one, so that sweep-level set-up is left out.
Functions are ``file:qualname``; lambdas, comprehensions, class and module bodies are left out; one
worker (``local.num_cpus=1``), so that a second worker's start-up does not count as a run's. ``--repo PATH``
measures another checkout (e.g. a ``git worktree`` of an older commit).

    python tests/bench/trace_sweep_path.py [--repo PATH] [--out bench-results]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
SKIP = ("<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<module>")


def install() -> None:
    """Profile this process (not the sweep's heartbeat thread): calls into ``$TRACE_REPO``'s sweeps/ or
    hydra_plugins/ counted by function, the counts written to ``$TRACE_OUT.<pid>`` every 0.2 s and at exit (a
    Ray worker is killed, not exited: the periodic write is what it leaves)."""
    import atexit
    import inspect
    import threading
    from collections import Counter

    repo, out = os.environ["TRACE_REPO"], f"{os.environ['TRACE_OUT']}.{os.getpid()}"
    roots = tuple(os.path.join(repo, part) + os.sep for part in ("sweeps", "hydra_plugins"))
    counts: Counter[str] = Counter()

    def profile(frame: object, event: str, arg: object) -> None:
        if event != "call" or threading.current_thread().name in ("schedlab-heartbeat", "trace-dump"):
            return
        code = frame.f_code  # type: ignore[attr-defined]
        if code.co_filename.startswith(roots) and code.co_flags & inspect.CO_OPTIMIZED and code.co_name not in SKIP:
            counts[f"{os.path.relpath(code.co_filename, repo)}:{code.co_qualname}"] += 1

    def dump() -> None:
        with open(out + ".tmp", "w") as handle:
            json.dump(dict(counts), handle)
        os.replace(out + ".tmp", out)

    def loop() -> None:
        while True:
            time.sleep(0.2)
            dump()

    threading.Thread(target=loop, name="trace-dump", daemon=True).start()
    atexit.register(dump)
    sys.setprofile(profile)
    threading.setprofile(profile)


def trace(repo: Path, runs: int) -> tuple[dict[str, int], dict[str, int]]:
    """A sweep of ``runs`` runs of ``repo`` under the profiler: call counts by function, driver and workers."""
    with tempfile.TemporaryDirectory(prefix="trace-") as tmp:
        out = Path(tmp) / "calls"
        env = {**os.environ, "TRACE_REPO": str(repo), "TRACE_OUT": str(out), "RAY_AUTH_MODE": "disabled",
               "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": f"{repo}{os.pathsep}{HERE.parent}"}
        driver = f"import sys, runpy; sys.path.insert(0, {str(HERE.parent)!r}); import trace_sweep_path as t; " \
                 f"t.install(); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
        args = [sys.executable, "-c", driver, str(repo / "sweeps" / "run.py"), "-m", "policy=easy",
                f"seed=range(0,{runs})", "cluster=hpc16", "workload.jobs=50", "hydra.launcher.progress=false",
                "hydra.launcher.local.object_store_memory=80000000", "hydra.launcher.local.num_cpus=1",
                "+hydra.launcher.init.runtime_env.worker_process_setup_hook=trace_sweep_path.install",
                f"tracking.uri=sqlite:///{tmp}/mlflow.db", f"tracking.artifact_root={tmp}/a",
                f"hydra.sweep.dir={tmp}/multirun"]
        proc = subprocess.Popen(args, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = proc.communicate(timeout=600)
        if proc.returncode != 0 or f"{runs} done" not in stdout:
            raise SystemExit(f"the traced sweep failed:\n{stdout[-2000:]}\n{stderr[-3000:]}")
        time.sleep(0.5)  # the last periodic writes of the workers
        files = {int(p.suffix[1:]): json.loads(p.read_text())
                 for p in Path(tmp).glob("calls.*") if p.suffix[1:].isdigit()}
    driver_counts = files.pop(proc.pid)
    workers: dict[str, int] = {}
    for counts in files.values():
        for name, n in counts.items():
            workers[name] = workers.get(name, 0) + n
    return driver_counts, workers


def per_run(repo: Path) -> dict:
    """Functions and modules one run passes through: those whose calls grow from a 1-run to a 3-run sweep
    (sweep-level set-up and teardown excluded), driver and worker; and everything either sweep called."""
    one, three = trace(repo, 1), trace(repo, 3)
    grows = sorted({name for side in (0, 1) for name, n in three[side].items() if n > one[side].get(name, 0)})
    every = sorted({name for side in (*one, *three) for name in side})
    return {"per_run_functions": len(grows), "per_run_modules": len({n.split(":")[0] for n in grows}),
            "all_functions": len(every), "all_modules": len({n.split(":")[0] for n in every}), "per_run": grows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=HERE.parents[2])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = per_run(args.repo.resolve())
    print(f"one run passes through {result['per_run_functions']} functions in {result['per_run_modules']} modules; "
          f"the sweep calls {result['all_functions']} in {result['all_modules']}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sweep_path.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
