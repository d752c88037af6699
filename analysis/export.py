"""The runs behind the paper tables as data: one Parquet file (``docs/paper/runs.parquet``) from which
``analysis/paper.py --runs FILE`` rebuilds every table, claim and figure without MLflow.

One row per FINISHED run that analysis reads (the latest of each run key, as :func:`analysis.runs.load_runs`
keeps): ``experiment``, ``run_id``, ``start_time``, the run key and simulator-code fingerprint tags
(``tags.schedlab.run_key``, ``tags.schedlab.code``), its inputs fingerprint (``tags.schedlab.inputs``; blank in
exports of runs recorded without one), every param as MLflow logged it (``params.<config key>``,
text; ``params.seed`` is the replication) and every metric (``metrics.<group/name>``). Rows keep the order
analysis read them in, and a run set read back goes through :meth:`analysis.runs.RunSet.from_records` like
one read from MLflow: the same frames, the same means to the last bit, the same bytes in every table.
``sweeps/restore.py`` turns an export back into a store's FINISHED runs, for a sweep to resume from.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow

from analysis import AnalysisError
from analysis.runs import CODE_TAG, INPUTS_TAG, RUN_KEY_TAG, SEED_KEY, RunSet

EXPERIMENT, RUN_ID, START = "experiment", "run_id", "start_time"
TAGS = (f"tags.{RUN_KEY_TAG}", f"tags.{CODE_TAG}")
INPUTS = f"tags.{INPUTS_TAG}"  # written since 2026-12-07; an earlier export has no such column
REQUIRED = (EXPERIMENT, RUN_ID, START, *TAGS, f"params.{SEED_KEY}")
DATA = ("params.", "metrics.")


def export_frame(runsets: Sequence[RunSet]) -> pd.DataFrame:
    """The export of ``runsets`` (one per experiment): their records, in order, with the columns above."""
    if not runsets:
        raise AnalysisError("no runs to export")
    parts = [runs.records.reindex(columns=[START, *TAGS, INPUTS, *(c for c in runs.records if c.startswith(DATA))])
             .rename_axis(RUN_ID).reset_index().assign(**{EXPERIMENT: runs.experiment}) for runs in runsets]
    frame = pd.concat(parts, ignore_index=True)
    return frame[[EXPERIMENT, RUN_ID, START, *TAGS, INPUTS, *sorted(c for c in frame if c.startswith(DATA))]]


def write_export(runsets: Sequence[RunSet], path: Path) -> int:
    """Write :func:`export_frame` to ``path`` atomically (a reader never sees half a file); returns its rows."""
    frame = export_frame(runsets)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        frame.to_parquet(partial, index=False, compression="zstd")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return len(frame)


@dataclass(frozen=True)
class RunExport:
    """A run export, read and checked (:meth:`read`); :meth:`runs` gives one experiment's runs."""

    path: Path
    frame: pd.DataFrame

    @classmethod
    def read(cls, path: Path) -> RunExport:
        """The export at ``path``; a one-line :class:`AnalysisError` when it is missing or not an export."""
        if not path.is_file():
            raise AnalysisError(f"no run export at {path} (write one with analysis/paper.py --export-runs FILE)")
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError, pyarrow.ArrowException) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise AnalysisError(f"{path} is not a run export: not a Parquet file ({first})") from None
        missing = [c for c in REQUIRED if c not in frame]
        if missing:
            raise AnalysisError(f"{path} is not a run export: no column {', '.join(missing)} (an export has "
                                f"{', '.join(REQUIRED)}, params.* and metrics.*)")
        text = [c for c in frame if c.startswith("metrics.") and not pd.api.types.is_numeric_dtype(frame[c])]
        if text:
            raise AnalysisError(f"{path}: column {text[0]} holds text, not metric values")
        twice = frame[RUN_ID][frame[RUN_ID].duplicated()]
        if len(twice):
            raise AnalysisError(f"{path}: run {twice.iloc[0]} is in the export twice")
        return cls(path, frame)

    def runs(self, experiment: str) -> RunSet:
        """The runs of ``experiment``, as :func:`analysis.runs.load_runs` read them from MLflow."""
        rows = self.frame[self.frame[EXPERIMENT] == experiment]
        if rows.empty:
            raise AnalysisError(f"experiment {experiment!r} has no runs yet in the run export {self.path}")
        return RunSet.from_records(experiment, str(self.path), rows.drop(columns=EXPERIMENT).set_index(RUN_ID))
