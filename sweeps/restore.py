"""Restore a store from a run export: the committed runs of a long study become FINISHED runs of a new
store again, so a sweep on a new machine resumes where the export left off instead of rerunning them.

Usage::

    python sweeps/restore.py --runs docs/paper/selection_runs.parquet --tracking-uri sqlite:////path/mlflow.db

An export (``analysis/export.py``: ``analysis/paper.py`` or ``analysis/selection.py --export-runs``) keeps each
run's experiment, start time, run key, simulator-code fingerprint, inputs fingerprint (exports written
since 2026-12-07), params and metrics. Each row becomes a FINISHED run of its experiment with those, and
the tags ``schedlab.restored_from`` (the export's file name) and ``schedlab.restored_run`` (its run id in
the store it was exported from); its artifacts and wall-clock end are not in an export, and are not made
up. A resumed sweep skips a restored run as it skips any FINISHED run: same run key, code and inputs
(``sweeps/planner.py``), so a changed simulator reruns it. A row whose key has a FINISHED run of the same code and
inputs in the store (restored or run there) is left alone: restoring twice adds nothing.

An export written before the inputs fingerprint was kept has none: the restore refuses it unless
``--inputs DIGEST`` says what its runs read (``none``: a generated workload, which reads no file).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from sweeps.identity import NO_INPUTS
from sweeps.tracking import CODE_TAG, INPUTS_TAG, TAG, MlflowStore, StoreURI, locked_retry, open_store, param_value

RUN_KEY = f"{TAG}run_key"
IDENTITY = (RUN_KEY, CODE_TAG, INPUTS_TAG)  # what a resumed sweep matches a FINISHED run on
RESTORED_FROM, RESTORED_RUN = f"{TAG}restored_from", f"{TAG}restored_run"
COLUMNS = ("experiment", "run_id", "start_time", f"tags.{RUN_KEY}", f"tags.{CODE_TAG}")


class RestoreError(Exception):
    """An export that cannot be restored, said in one line."""


def read_export(path: Path, inputs: str | None) -> pd.DataFrame:
    """The export's rows, each with its inputs fingerprint (from the export, else ``inputs``)."""
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise RestoreError(f"{path} is not a run export: {str(exc).splitlines()[0] if str(exc) else exc!r}") from None
    missing = [c for c in COLUMNS if c not in frame]
    if missing:
        raise RestoreError(f"{path} is not a run export: no column {', '.join(missing)}")
    column = f"tags.{INPUTS_TAG}"
    known = frame[column] if column in frame else pd.Series(None, index=frame.index, dtype=object)
    if known.isna().any() and inputs is None:
        raise RestoreError(f"{path}: {int(known.isna().sum())} runs without their inputs fingerprint (an export "
                           f"written before it was kept): give --inputs {NO_INPUTS} if they read no input file "
                           "(a generated workload), else rerun them")
    return frame.assign(**{column: known.fillna(inputs) if inputs is not None else known})


def restore(path: Path, uri: str, artifact_root: str | None = None, inputs: str | None = None,
            progress: Callable[[str], None] = print) -> tuple[int, int]:
    """Restore the export at ``path`` into the store ``uri``: (runs restored, runs already there)."""
    frame = read_export(path, inputs)
    restored = kept = 0
    for experiment, rows in frame.groupby("experiment", sort=False):
        store = open_store(uri, str(experiment), artifact_root)
        finished = [r for runs in store.runs_by_key().values() for r in runs if r.info.status == "FINISHED"]
        done = {tuple(r.data.tags.get(t) for t in IDENTITY) for r in finished}  # a restored run's included
        for _, row in rows.iterrows():
            identity = tuple(row[f"tags.{t}"] for t in IDENTITY)
            if identity in done:
                kept += 1
                continue
            _record(store, row, path.name)
            done.add(identity)
            restored += 1
        progress(f"{experiment}: {len(rows)} runs in the export")
    return restored, kept


def _record(store: MlflowStore, row: pd.Series, source: str) -> None:
    """One export row as a FINISHED run of ``store``'s experiment."""
    from mlflow.entities import Metric, Param

    start = int(pd.Timestamp(row["start_time"]).timestamp() * 1000)
    tags = {k.removeprefix("tags."): str(v) for k, v in row.items() if k.startswith("tags.") and not pd.isna(v)}
    tags |= {RESTORED_FROM: source, RESTORED_RUN: str(row["run_id"])}
    created = locked_retry(store.client.create_run, store.experiment_id, start_time=start, tags=tags,
                           run_name=f"restored {row['run_id']}")
    run_id = created.info.run_id
    params = [Param(k.removeprefix("params."), param_value(v)) for k, v in row.items()
              if k.startswith("params.") and not pd.isna(v)]
    metrics = [Metric(k.removeprefix("metrics."), float(v), start, 0) for k, v in row.items()
               if k.startswith("metrics.") and not pd.isna(v)]
    for i in range(0, max(len(params), len(metrics), 1), 100):  # MLflow takes at most 100 params per batch
        locked_retry(store.client.log_batch, run_id, metrics=metrics[i:i + 100], params=params[i:i + 100])
    locked_retry(store.client.set_terminated, run_id, status="FINISHED")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sweeps/restore.py", description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, required=True, help="the run export (Parquet) to restore")
    p.add_argument("--tracking-uri", required=True, help="the store to restore into (created if missing)")
    p.add_argument("--artifact-root", help="artifact root of the experiments it creates, as tracking.artifact_root "
                                           "(default for a SQLite store: ./mlartifacts, as conf/tracking/sqlite.yaml)")
    p.add_argument("--inputs", help=f"inputs fingerprint of every run of an export without one ({NO_INPUTS}: "
                                    "a generated workload)")
    args = p.parse_args(argv)
    local = StoreURI(args.tracking_uri).sqlite_file is not None
    root = args.artifact_root or (str(Path.cwd() / "mlartifacts") if local else None)
    try:
        restored, kept = restore(args.runs, args.tracking_uri, root, args.inputs)
    except RestoreError as error:
        print(f"restore: {error}", file=sys.stderr)
        return 2
    print(f"restored {restored} runs into {args.tracking_uri} ({kept} already there)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
