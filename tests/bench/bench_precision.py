"""Sequential precision against fixed replications on the demo comparison (issue #10): the runs and
wall time ``experiment=precision_demo`` (EASY vs CONSERVATIVE, each to ±5 % on wait/mean, 95 % CI)
needs, against a fixed-replications sweep (Hydra's basic sweeper, ``seed=range(0,n_fixed)``) reaching
the same worst-cell precision: ``n_fixed`` is the largest n the precision sweep gave a cell, and
every cell gets it. Both sweeps run here, one after the other, each a fresh ``sweeps/run.py -m``
process (the Ray launcher, a local Ray) in its own directory with its own SQLite MLflow store.
A third sweep is the paired mode on the same target (``hydra.sweeper.baseline=policy=easy``:
CONSERVATIVE − EASY per seed to ±5 % of the mean difference), a different question the same
runs answer. Writes ``precision.json`` and ``precision.md``, and the precision sweep's output as
``precision_sweep.txt``.

    python tests/bench/bench_precision.py --out bench-results [OVERRIDE ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from analysis.runs import load_runs  # noqa: E402
from sim import precision as pr  # noqa: E402
from tests.bench._output import machine, write  # noqa: E402

RUN = REPO / "sweeps" / "run.py"
DEMO = REPO / "conf" / "experiment" / "precision_demo.yaml"
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
QUIET = ["hydra.sweep.dir=multirun"]
BASELINE = "policy=easy"


def sweep(cwd: Path, *overrides: str) -> tuple[float, str]:
    """One ``sweeps/run.py -m`` in ``cwd``: its wall seconds and standard output."""
    cmd = [sys.executable, str(RUN), "-m", *overrides, *QUIET]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed: {' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall, proc.stdout


def fixed_overrides(n: int, extra: list[str]) -> list[str]:
    """The demo as a basic-sweeper sweep: its axes, its workload settings, seeds 0 … n − 1, then
    ``extra`` (but the precision sweeper's own options)."""
    demo = OmegaConf.load(DEMO)
    settings = {**{k: str(v) for k, v in demo.hydra.sweeper.params.items()},
                **{f"workload.{k}": str(v) for k, v in demo.workload.items()},
                "experiment_name": str(demo.experiment_name), "seed": f"range(0,{n})"}
    settings.update(o.split("=", 1) for o in extra if not o.startswith("hydra.sweeper."))
    return [f"{k}={v}" for k, v in settings.items()]


def cells_of(uri: str, experiment: str, metric: str, axes: list[str], confidence: float,
             target: pr.Target) -> dict[str, pr.Precision]:
    """Per cell (the axes' values; ``policy`` is its ``policy.name``) of the store's FINISHED runs: n,
    mean and half-width of ``metric``."""
    runs = load_runs(experiment, uri)
    params = runs.params.loc[runs.metrics.index]
    out: dict[str, pr.Precision] = {}
    for values, group in runs.metrics.groupby([params[runs.resolve_factor(a)] for a in axes]):
        label = " ".join(f"{a}={v}" for a, v in zip(axes, values if isinstance(values, tuple) else (values,),
                                                      strict=True))
        out[label] = pr.precision(group[metric].dropna().tolist(), target, confidence)
    return out


def _relative(p: pr.Precision) -> float:
    return p.half_width / abs(p.mean)


def row(name: str, wall: float, stdout: str, verdicts: dict[str, pr.Verdict]) -> dict:
    """A precision sweep's line: runs, rounds, wall seconds, worst and per-cell relative half-width
    (a paired comparator's is that of its difference to the baseline)."""
    cells = {c: {"n": p.n, "relative": _relative(p), "status": v.status}
             for c, v in verdicts.items() for p in v.metrics if v.status != pr.BASELINE}
    return {"sweep": name, "runs": sum(v.tried for v in verdicts.values()),
            "rounds": stdout.count("] precision round "), "wall": wall,
            "worst": max(c["relative"] for c in cells.values()), "cells": cells}


def table(rows: list[dict]) -> str:
    lines = ["| sweep | runs | rounds | wall s | s per run | worst-cell ± / mean | per cell: n, ± / mean |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        cells = "; ".join(f"{c}: {v['n']}, {v['relative']:.2%}" for c, v in r["cells"].items())
        lines.append(f"| {r['sweep']} | {r['runs']} | {r['rounds']} | {r['wall']:.1f} | {r['wall'] / r['runs']:.2f} | "
                     f"{r['worst']:.2%} | {cells} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--paired-max", type=int, default=200,
                        help="the paired sweep's max_replications (its difference is as heavy-tailed as CONSERVATIVE)")
    parser.add_argument("overrides", nargs="*", help="extra overrides for every sweep (e.g. workload.jobs=2000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-precision-") as tmp:
        adaptive, fixed, paired = (Path(tmp) / name for name in ("precision", "fixed", "paired"))
        adaptive.mkdir(), fixed.mkdir(), paired.mkdir()
        wall, stdout = sweep(adaptive, "experiment=precision_demo", *args.overrides)
        verdicts, rule = pr.load(adaptive / "multirun" / "precision.json")
        n_fixed = max(v.tried for v in verdicts.values())
        demo = OmegaConf.load(DEMO)
        [target] = rule.targets
        fixed_wall, _ = sweep(fixed, *fixed_overrides(n_fixed, args.overrides))
        found = cells_of(f"sqlite:///{fixed}/mlflow.db", str(demo.experiment_name), target.metric,
                         list(demo.hydra.sweeper.params), rule.confidence, target)
        paired_wall, paired_out = sweep(paired, "experiment=precision_demo", f"hydra.sweeper.baseline='{BASELINE}'",
                                        f"hydra.sweeper.max_replications={args.paired_max}", *args.overrides)
        paired_verdicts, _ = pr.load(paired / "multirun" / "precision.json")
    rows = [
        row(f"precision (n₀ = {rule.initial}, +{rule.batch}{' or n*' if rule.extrapolate else ''} a round)", wall,
            stdout, verdicts),
        {"sweep": f"fixed, n = {n_fixed} per cell", "runs": n_fixed * len(found), "rounds": 1, "wall": fixed_wall,
         "worst": max(_relative(p) for p in found.values()),
         "cells": {c: {"n": p.n, "relative": _relative(p), "status": pr.MET if p.met else pr.CAPPED}
                   for c, p in found.items()}},
        row(f"paired: difference to {BASELINE}, max {args.paired_max}", paired_wall, paired_out, paired_verdicts),
    ]
    body = {"meta": machine(), "target": {"metric": target.metric, "relative": target.relative,
                                           "confidence": rule.confidence},
            "overrides": args.overrides, "n_fixed": n_fixed, "paired_max": args.paired_max, "results": rows}
    write(args.out, "precision", body, table(rows))
    (args.out / "precision_sweep.txt").write_text(stdout)
    saved = 1 - rows[0]["runs"] / rows[1]["runs"]
    print(f"precision sweep: {rows[0]['runs']} runs vs {rows[1]['runs']} fixed ({saved:.0%} fewer), "
          f"{wall:.1f} s vs {fixed_wall:.1f} s")


if __name__ == "__main__":
    main()
