"""Load a sweep's tracked runs from MLflow: FINISHED runs feed the tables, FAILED ones are listed.

The run layout is the contract with ``sweeps``: params are the flattened resolved config with
dotted keys (``policy.order``, ``workload.arrival_rate`` …, ``_target_`` class paths included), the
policy's label as ``policy`` (its config choice: ``easy``, ``mine``) and the replication seed as ``seed``;
metrics are ``group/name`` (``wait/mean``, ``util`` …); tags ``schedlab.run_key``,
``schedlab.sweep_id``, ``schedlab.code`` (fingerprint of the simulator code that produced the run),
``schedlab.error`` (FAILED runs); artifacts ``jobs.parquet`` and
``config.yaml``. Nothing here writes to the store.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import AnalysisError
from analysis.store import check_store

DEFAULT_EXPERIMENT = "schedlab-demo"
SEED_KEY = "seed"
RUN_KEY_TAG = "schedlab.run_key"
SWEEP_TAG = "schedlab.sweep_id"
ERROR_TAG = "schedlab.error"
CODE_TAG = "schedlab.code"
INPUTS_TAG = "schedlab.inputs"
UNKNOWN_CODE = "unknown"  # the fingerprint of runs logged without a schedlab.code tag


def default_tracking_uri(cwd: Path | None = None) -> str:
    """The sweeps' default store, ``sqlite:///<absolute cwd>/mlflow.db``."""
    return f"sqlite:///{(cwd or Path.cwd()).resolve() / 'mlflow.db'}"


@dataclass
class RunSet:
    """The usable runs of one experiment, split into params, metrics and tags (index ``run_id``).

    Only FINISHED runs are in ``params``/``metrics``/``tags``; when several finished runs share a
    ``schedlab.run_key`` (a resumed or repeated sweep) the latest one is kept. ``failed`` holds
    FAILED runs that no finished run of the same key replaced (their params and ``error``);
    ``dropped`` counts what was left out and why; ``records`` are the finished runs as read
    (:meth:`from_records`), which a run export (:mod:`analysis.export`) keeps.
    """

    experiment: str
    tracking_uri: str
    params: pd.DataFrame
    metrics: pd.DataFrame
    tags: pd.DataFrame
    failed: pd.DataFrame
    dropped: dict[str, int] = field(default_factory=dict)
    records: pd.DataFrame = field(default_factory=pd.DataFrame)

    @classmethod
    def from_records(cls, experiment: str, tracking_uri: str, records: pd.DataFrame, failed: pd.DataFrame | None = None,
                     dropped: dict[str, int] | None = None) -> RunSet:
        """The runs of FINISHED run records in ``mlflow.search_runs``' shape (index ``run_id``; ``params.*``
        as logged, ``metrics.*``, ``tags.*``), in their order: the one way runs become a RunSet, whether
        read from MLflow (:func:`load_runs`) or from a run export (:mod:`analysis.export`)."""
        return cls(experiment, tracking_uri, _columns(records, "params."), _columns(records, "metrics.").astype(float),
                   _columns(records, "tags.", parse=False), pd.DataFrame() if failed is None else failed,
                   dict(dropped or {}), records)

    def varying(self, seed_key: str = SEED_KEY, cols: Sequence[str] = ()) -> list[str]:
        """Config keys that vary across the finished runs (see :func:`varying_keys`)."""
        return varying_keys(self.params, seed_key, cols)

    def resolve_factor(self, name: str, seed_key: str = SEED_KEY) -> str:
        """The param key a user means by ``name`` (exact, ``<name>.name`` of older runs, unique suffixes)."""
        return resolve_key(name, list(self.params.columns), "factor", self.varying(seed_key))

    def resolve_metric(self, name: str) -> str:
        """``name`` itself if some finished run logged it, else a one-line error listing metrics."""
        if name in self.metrics.columns:
            return name
        raise AnalysisError(
            f"unknown metric {name!r} in experiment {self.experiment!r}; "
            f"logged metrics: {_listing(sorted(self.metrics.columns))}"
        )

    def design(self, factors: Sequence[str], metrics: Sequence[str], seed_key: str = SEED_KEY) -> pd.DataFrame:
        """One row per finished run: the given factor columns, the seed (if logged) and metrics."""
        keys = list(dict.fromkeys([*factors, *([seed_key] if seed_key in self.params else [])]))
        clash = set(keys) & set(metrics)
        if clash:
            raise AnalysisError(f"names used both as a config key and a metric: {sorted(clash)}")
        return self.params.reindex(columns=keys).join(self.metrics.reindex(columns=list(metrics)))

    def code_fingerprints(self) -> pd.Series:
        """Each finished run's ``schedlab.code`` tag; :data:`UNKNOWN_CODE` for runs without one."""
        tag = self.tags[CODE_TAG] if CODE_TAG in self.tags else pd.Series(index=self.params.index, dtype=object)
        return tag.reindex(self.params.index).fillna(UNKNOWN_CODE).astype(str).rename(CODE_TAG)

    def artifact_table(self, run_id: str, name: str = "jobs.parquet") -> pd.DataFrame | None:
        """A run's Parquet artifact as a frame, or None when the run has no such artifact."""
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        with tempfile.TemporaryDirectory() as tmp:
            try:
                path = MlflowClient(self.tracking_uri).download_artifacts(run_id, name, tmp)
                return pd.read_parquet(path)
            except (MlflowException, OSError):
                return None


def load_runs(
    experiment: str = DEFAULT_EXPERIMENT, tracking_uri: str | None = None, sweep: str | None = None
) -> RunSet:
    """Read every run of ``experiment`` with one ``mlflow.search_runs`` call.

    ``sweep`` keeps only runs tagged ``schedlab.sweep_id`` = sweep (``"latest"``: the sweep of the
    most recently started run). Raises :class:`AnalysisError` with a one-line message for a
    missing or unusable store (:func:`analysis.store.check_store`: never created or written to), an
    unknown experiment (listing the existing ones) or one without finished runs.
    """
    uri = tracking_uri or default_tracking_uri()
    check_store(uri)
    import mlflow
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import SQLAlchemyError

    try:
        found = mlflow.MlflowClient(uri).get_experiment_by_name(experiment)
        if found is None:
            names = sorted(e.name for e in mlflow.MlflowClient(uri).search_experiments())
            raise AnalysisError(f"unknown experiment {experiment!r} in {uri}; experiments: {_listing(names)}")
        with _tracking(uri):
            frame = mlflow.search_runs(experiment_ids=[found.experiment_id])
    except (MlflowException, SQLAlchemyError, UnicodeDecodeError) as exc:  # a newer schema, damage past the tables
        raise AnalysisError(f"cannot read MLflow store {uri}: {str(exc).splitlines()[0]}") from exc
    if frame.empty:
        raise AnalysisError(f"experiment {experiment!r} has no runs yet ({uri}); run a sweep first")
    frame = _select_sweep(frame, sweep, experiment)
    return _split(frame, experiment, uri)


def varying_keys(
    params: pd.DataFrame, seed_key: str = SEED_KEY, cols: Sequence[str] = ()) -> list[str]:
    """Config keys with more than one value, sorted — the candidate row factors.

    Left out: the replication key ``seed_key`` and keys that merely copy it (same partition of
    the runs, e.g. ``workload.seed``), the column factors ``cols`` and keys fixed within each
    column level (attributes of a policy such as ``policy.order`` when every policy has one).
    Bookkeeping keys (``sweep.non_semantic``) are never params: runs log their semantic config only.

    >>> p = pd.DataFrame({"policy": list("aaaabbbb"), "policy.order": list("xxxxyyyy"),
    ...                   "rate": [1, 1, 2, 2] * 2, "seed": [0, 1] * 4, "nodes": [4] * 8})
    >>> varying_keys(p, cols=["policy"])
    ['rate']
    """
    out = []
    seed = params.get(seed_key)
    for key in sorted(params.columns):
        column = params[key]
        if key == seed_key or key in cols or column.nunique(dropna=False) < 2:
            continue
        if seed is not None and _same_partition(column, seed):
            continue
        if cols and params.groupby(list(cols), dropna=False)[key].nunique(dropna=False).max() == 1:
            continue
        out.append(key)
    return out




def resolve_key(name: str, keys: Sequence[str], kind: str, varying: Sequence[str] = ()) -> str:
    """Map a user's short name to a config key: exact, then ``<name>.name`` (runs recorded before policy
    labels), then a unique suffix.

    >>> resolve_key("policy", ["policy", "policy.order", "seed"], "factor")
    'policy'
    >>> resolve_key("arrival_rate", ["workload.arrival_rate"], "factor")
    'workload.arrival_rate'
    """
    if name in keys:
        return name
    if f"{name}.name" in keys:
        return f"{name}.name"
    suffixed = [k for k in keys if k.endswith("." + name)]
    if len(suffixed) == 1:
        return suffixed[0]
    hint = f"ambiguous, matches {suffixed}" if suffixed else "not a config key"
    return _raise(
        f"unknown {kind} {name!r} ({hint}); keys that vary: {_listing(list(varying)) or 'none'}; "
        f"all keys: {_listing(sorted(keys))}"
    )


def _raise(message: str) -> Any:
    raise AnalysisError(message)


def _listing(names: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


@contextmanager
def _tracking(uri: str) -> Iterator[None]:
    """Point the fluent ``mlflow`` API at ``uri`` for the block, then restore what was there."""
    import mlflow

    env = os.environ.get("MLFLOW_TRACKING_URI")
    previous = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous)  # type: ignore[arg-type]  # None unsets
        if env is not None:
            os.environ["MLFLOW_TRACKING_URI"] = env


def _select_sweep(frame: pd.DataFrame, sweep: str | None, experiment: str) -> pd.DataFrame:
    if sweep is None:
        return frame
    column = f"tags.{SWEEP_TAG}"
    tagged = frame[frame[column].notna()] if column in frame else frame.iloc[:0]
    if tagged.empty:
        raise AnalysisError(f"no run of experiment {experiment!r} carries a {SWEEP_TAG} tag")
    if sweep == "latest":
        sweep = str(tagged.sort_values("start_time")[column].iloc[-1])
    chosen = tagged[tagged[column] == sweep]
    if chosen.empty:
        known = list(dict.fromkeys(tagged.sort_values("start_time", ascending=False)[column]))
        raise AnalysisError(f"unknown sweep {sweep!r}; sweeps (newest first): {_listing(known)}")
    return chosen


def _split(frame: pd.DataFrame, experiment: str, uri: str) -> RunSet:
    frame = frame.sort_values("start_time").set_index("run_id")
    key = f"tags.{RUN_KEY_TAG}"
    status = frame["status"]
    finished = frame[status == "FINISHED"]
    dropped = {f"status {s}": int(n) for s, n in status[~status.isin(["FINISHED", "FAILED"])].value_counts().items()}
    if key in frame:
        keyed = finished[key].notna()
        unique = finished[~keyed | ~finished[key].duplicated(keep="last")]
        dropped["superseded by a later run of the same run key"] = len(finished) - len(unique)
        finished = unique
    failed = frame[status == "FAILED"]
    if key in frame and not failed.empty:
        done = set(finished[key].dropna())
        replaced = failed[key].isin(done)
        dropped["FAILED, then finished on retry"] = int(replaced.sum())
        failed = failed[~replaced]
    dropped = {k: v for k, v in dropped.items() if v}
    if finished.empty:
        raise AnalysisError(
            f"experiment {experiment!r} has no FINISHED runs ({len(failed)} FAILED"
            + (f"; first error: {_first_error(failed)}" if len(failed) else "")
            + ")"
        )
    failed_params = _columns(failed, "params.")
    failed_view = failed_params.assign(
        error=failed.get(f"tags.{ERROR_TAG}"),
        start_time=failed["start_time"],
    )
    return RunSet.from_records(experiment, uri, finished, failed_view, dropped)


def _first_error(failed: pd.DataFrame) -> str:
    column = f"tags.{ERROR_TAG}"
    errors = failed[column].dropna() if column in failed else pd.Series(dtype=str)
    return str(errors.iloc[0]).splitlines()[0] if len(errors) else "no schedlab.error tag"


def _columns(frame: pd.DataFrame, prefix: str, parse: bool = True) -> pd.DataFrame:
    """The ``prefix.*`` columns of a search_runs frame, prefix stripped, sorted (search_runs' own order
    varies from process to process), all-empty columns dropped."""
    names = sorted(c for c in frame.columns if c.startswith(prefix))
    out = frame[names].rename(columns=lambda c: c[len(prefix):]).dropna(axis=1, how="all")
    return out.apply(_parse) if parse and len(out.columns) else out


def _parse(column: pd.Series) -> pd.Series:
    """Numbers where every logged value is one (params arrive as strings), else unchanged."""
    numbers = pd.to_numeric(column, errors="coerce")
    return numbers if numbers.notna().sum() == column.notna().sum() else column


def _same_partition(a: pd.Series, b: pd.Series) -> bool:
    """Whether ``a`` and ``b`` group the runs identically (one is a relabelling of the other)."""
    codes_a, codes_b = pd.factorize(a, use_na_sentinel=False)[0], pd.factorize(b, use_na_sentinel=False)[0]
    pairs = len(set(zip(codes_a, codes_b, strict=True)))
    return pairs == len(set(codes_a)) == len(set(codes_b))
