"""``make paper``'s first half: run every ``conf/experiment/paper_*.yaml`` through the normal sweep.

Usage::

    python sweeps/paper.py                                 # every paper table, this machine's cores
    python sweeps/paper.py --only 'paper_ligo_*' replications=3 workload.jobs=500   # a quick look
    RAY_ADDRESS=HOST:6379 python sweeps/paper.py           # on a running `ray start --head` cluster

Each experiment is one ``python sweeps/run.py -m experiment=<name> [overrides]``: the same
composition, validation, resume (finished runs are skipped) and recording as any sweep. Extra
arguments are Hydra overrides passed to every sweep; ``RAY_ADDRESS`` becomes
``hydra.launcher.address`` unless an override sets it. Stops at the first failing sweep.

Ctrl-C (or SIGTERM, SIGHUP) stops the running sweep as Ctrl-C stops any sweep — it records what
finished and shuts Ray down, within :data:`GRACE` seconds or a second Ctrl-C, else it is killed —
and ends with one line, :data:`INTERRUPTED`, and exit status 130. Each sweep runs in its own process
group, so a terminal's Ctrl-C reaches it once, from here, and never reaches Ray's workers.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "sweeps" / "run.py"
INTERRUPTED = "interrupted: rerun make paper to resume (finished runs are kept)"
#: seconds an interrupted sweep gets to record what finished and shut Ray down before it is killed
GRACE = 60.0


def experiments(conf_dir: Path, patterns: list[str]) -> list[str]:
    """The ``paper_*`` experiment names under ``conf_dir`` matching any of ``patterns`` (sorted)."""
    names = sorted(p.stem for p in conf_dir.glob("paper_*.yaml"))
    chosen = [n for n in names if not patterns or any(fnmatch.fnmatch(n, pat) for pat in patterns)]
    if not chosen:
        raise SystemExit(f"sweeps/paper.py: no experiment matches {patterns} in {conf_dir} (have: {', '.join(names)})")
    return chosen


def commands(names: list[str], overrides: list[str], environ: dict[str, str]) -> list[list[str]]:
    """One ``sweeps/run.py -m`` command line per experiment.

    >>> commands(["paper_a"], ["replications=2"], {"RAY_ADDRESS": "auto"})[0][2:]
    ['-m', 'experiment=paper_a', 'hydra.launcher.address=auto', 'replications=2']
    """
    address = environ.get("RAY_ADDRESS")
    extra = ([f"hydra.launcher.address={address}"]
             if address and not any(o.startswith("hydra.launcher.address=") for o in overrides) else [])
    return [[sys.executable, str(RUN), "-m", f"experiment={name}", *extra, *overrides] for name in names]


def run_sweep(command: list[str]) -> int:
    """Run one sweep in its own process group; its exit status (128 + N when killed by signal N). On Ctrl-C
    the sweep gets one SIGINT, then its group is killed after :data:`GRACE` s or a second Ctrl-C; it is re-raised,
    as it is when the sweep itself was interrupted (exit status 130)."""
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, process_group=0)
    try:
        code = child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=GRACE)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            with contextlib.suppress(ProcessLookupError):  # the group may be gone already
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        raise
    status = code if code >= 0 else 128 - code
    if status == 128 + signal.SIGINT:  # the sweep itself was interrupted (SIGTERM to it, say)
        raise KeyboardInterrupt
    return status


def stop_on_signals() -> None:
    """A cancelled job (SIGTERM, SIGHUP) stops a driver of sweeps as Ctrl-C does; SIGINT too when started with it
    ignored (a background command of a script): the sweeps it starts then get Python's Ctrl-C handling back."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sweeps/paper.py", description="run every paper_*.yaml experiment")
    p.add_argument("--only", action="append", default=[], metavar="GLOB",
                   help="experiment name pattern, e.g. 'paper_ligo_*' (repeatable; default: all)")
    p.add_argument("--conf-dir", type=Path, default=REPO / "conf" / "experiment",
                   help="where the paper_*.yaml files are (default: %(default)s)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides for every sweep (replications=3 …)")
    args = p.parse_args(argv)
    names = experiments(args.conf_dir, args.only)
    started = time.perf_counter()
    try:
        for name, command in zip(names, commands(names, args.overrides, dict(os.environ)), strict=True):
            print(f"== {name}: {shlex.join(command[1:])}", flush=True)
            tic = time.perf_counter()
            code = run_sweep(command)
            print(f"== {name}: exit {code}, {time.perf_counter() - tic:.0f} s wall", flush=True)
            if code:
                return code
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr, flush=True)
        return 128 + signal.SIGINT
    print(f"== {len(names)} paper sweeps in {time.perf_counter() - started:.0f} s wall", flush=True)
    return 0


if __name__ == "__main__":
    stop_on_signals()
    sys.exit(main())
