"""``make selection``: issue 38's declared model-selection study (``docs/paper/selection.md``) run to its end.

Usage::

    python sweeps/selection.py --tracking-uri sqlite:////path/outside/the/tree/mlflow.db [overrides …]

Each pass asks ``analysis/selection.py --next`` which sweeps the protocol needs next — every candidate's
coarse fit grid, then the refinement around its best coarse size, then its held-out points at its size*
(§§ 3–4) — runs them one by one as ``make paper`` runs its experiments (``sweeps/run.py -m``: a rerun skips
finished runs, so the study resumes), and asks again, until none is left. Extra arguments are Hydra
overrides for every sweep (``hydra/launcher=serial`` on a shared machine). A sweep that fails stops the
study with its exit status; a pass after which the same sweeps are still to make (their runs skipped as
running in another sweep, say) stops with exit status 1 and names the first. Ctrl-C stops as in ``make paper``.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import time

from sweeps.paper import REPO, RUN, run_sweep, stop_on_signals

PLAN = REPO / "analysis" / "selection.py"
INTERRUPTED = "interrupted: rerun make selection to resume (finished runs are kept)"


class PlanError(Exception):
    """The plan could not be read (its one-line message, its exit status)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def plan(tracking_uri: str) -> list[str]:
    """The sweeps still to make, each one's ``sweeps/run.py -m`` overrides (``analysis/selection.py --next``)."""
    done = subprocess.run([sys.executable, str(PLAN), "--tracking-uri", tracking_uri, "--next"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if done.returncode:
        raise PlanError(done.stderr.strip() or f"{PLAN.name} --next exited {done.returncode}", done.returncode)
    return done.stdout.splitlines()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sweeps/selection.py", description=__doc__.splitlines()[0].strip("`: "))
    p.add_argument("--tracking-uri", required=True, help="the study's store, outside the work tree")
    p.add_argument("overrides", nargs="*", help="Hydra overrides for every sweep (hydra/launcher=serial …)")
    args = p.parse_args(argv)
    started, before, swept = time.perf_counter(), None, 0
    try:
        while True:
            try:
                todo = plan(args.tracking_uri)
            except PlanError as error:
                print(error, file=sys.stderr)
                return error.code
            if not todo:
                print(f"== the study is complete ({swept} sweeps in {time.perf_counter() - started:.0f} s wall): "
                      f"python analysis/selection.py --tracking-uri {args.tracking_uri} writes its Results", flush=True)
                return 0
            if todo == before:
                print(f"selection: a pass ran these {len(todo)} sweep(s) and they are still to make, the first: "
                      f"{todo[0]} — are their runs running in another sweep? Rerun when it ends", file=sys.stderr)
                return 1
            for overrides in todo:
                command = [sys.executable, str(RUN), "-m", *shlex.split(overrides), *args.overrides]
                print(f"== {shlex.join(command[1:])}", flush=True)
                code = run_sweep(command)
                if code:
                    return code
                swept += 1
            before = todo
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr, flush=True)
        return 128 + signal.SIGINT


if __name__ == "__main__":
    stop_on_signals()
    sys.exit(main())
