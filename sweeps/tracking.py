"""MLflow bookkeeping: run keys, params, one logged run per result (:mod:`sweeps.record` says where).

Several processes creating one SQLite store at once corrupt its schema: a store is opened under a file
lock beside it (:func:`store_lock`), so two sweeps starting together on a new store both work.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlparse

#: MLflow 3's usage telemetry sets and unsets an environment variable from its own thread while requests read it:
#: a store call failed with ``'_MLFLOW_TELEMETRY_SESSION_ID'`` (a run FAILED in a two-sweep test); schedlab turns it
#: off in every process that records (set MLFLOW_DISABLE_TELEMETRY=false to keep it)
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

TAG = "schedlab."
MAX_PARAM_CHARS = 6000
T = TypeVar("T")
CODE_TAG, CODE_FILES_TAG = f"{TAG}code", f"{TAG}code_files"
INPUTS_TAG, INPUT_FILES_TAG = f"{TAG}inputs", f"{TAG}input_files"
SUPERSEDED_TAG = f"{TAG}superseded_by"  # on a FINISHED run a later record of its key replaces: that run's id
#: the MLflow UI's filter for the current runs (no later record replaced them)
CURRENT_RUNS = f"tags.`{SUPERSEDED_TAG}` IS NULL"


@dataclass(frozen=True)
class StoreURI:
    """A tracking URI, parsed once for everything that asks what it names: a tracking server
    (``http(s)://``), a SQLite file (``sqlite:///PATH`` with SQLAlchemy's query options such as
    ``?timeout=30``) or a folder (``file:`` or a plain path).

    >>> StoreURI("sqlite:////d/mlflow.db?timeout=30").sqlite_file
    PosixPath('/d/mlflow.db')
    >>> StoreURI("sqlite:///rel.db").sqlite_file, StoreURI("sqlite://").sqlite_file
    (PosixPath('rel.db'), None)
    >>> StoreURI("http://127.0.0.1:5000").remote, StoreURI("file:///tmp/mlruns").folder
    (True, PosixPath('/tmp/mlruns'))
    """

    uri: str

    @property
    def remote(self) -> bool:
        return urlparse(self.uri).scheme in ("http", "https")

    @property
    def sqlite_file(self) -> Path | None:
        """The database file of a ``sqlite`` URI (SQLAlchemy's own parse), ``None`` for any other store or an
        in-memory database."""
        return _sqlite_file(self.uri) if self.uri.startswith("sqlite") else None

    @property
    def folder(self) -> Path | None:
        """The folder of a file store (``file:`` URI or a plain path), else ``None``."""
        if self.uri.startswith("file:"):
            return Path(unquote(urlparse(self.uri).path))
        return Path(self.uri) if "://" not in self.uri else None


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys for a nested mapping (lists stay one JSON value).

    >>> flatten({"policy": {"order": "sjf"}, "seed": 3})
    {'policy.order': 'sjf', 'seed': 3}
    """
    flat: dict[str, Any] = {}
    for key, value in cfg.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


@cache
def _sqlite_file(uri: str) -> Path | None:
    from sqlalchemy.engine import make_url

    database = make_url(uri).database
    return Path(database) if database and database != ":memory:" else None


def non_semantic_key(key: str, non_semantic: Iterable[str]) -> bool:
    """Whether a dotted key is, or lies under, one of ``non_semantic`` (``sweep.non_semantic``'s keys).

    >>> non_semantic_key("tracking.uri", ["tracking"]), non_semantic_key("trackings", ["tracking"])
    (True, False)
    """
    return _under(tuple(non_semantic))(key) is not None


@cache
def _under(keys: tuple[str, ...]) -> Callable[[str], Any]:
    """A match of a dotted key that is, or lies under, one of ``keys``."""
    return re.compile("|".join(rf"{re.escape(k)}(\.|$)" for k in keys) or "(?!)").match


def semantic_config(cfg: Mapping[str, Any], non_semantic: Iterable[str]) -> dict[str, Any]:
    """``cfg`` flattened, without the dotted keys (or key prefixes) in ``non_semantic``."""
    under = _under(tuple(non_semantic))
    return {k: v for k, v in flatten(cfg).items() if under(k) is None}


def run_key(cfg: Mapping[str, Any], non_semantic: Iterable[str], label: str = "") -> str:
    """A stable hash of what determines a run's result and how it is labelled (same config and policy
    label ⇒ same key, in any process): runs of one configuration under two labels are two cells.

    >>> run_key({"seed": 1, "tracking": {"uri": "a"}}, ["tracking"]) == run_key({"seed": 1}, [])
    True
    """
    return key_of(semantic_config(cfg, non_semantic), label)


def key_of(semantic: Mapping[str, Any], label: str = "") -> str:
    """:func:`run_key` of a config already flattened by :func:`semantic_config`."""
    text = json.dumps({**semantic, "policy": label} if label else dict(semantic), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


#: where ``mlflow ui`` serves by default
UI_ADDRESS = "http://127.0.0.1:5000"


def browse(uri: str, experiment_id: str) -> str:
    """How to open an experiment's current runs in the MLflow UI. MLflow 3.17's UI opens an experiment on its
    GenAI overview ("Traces 0") whatever the experiment's tags: its view is the browser's ``workflowType``
    setting, which a link sets with ``?workflowType=machine_learning`` (read from the UI's source:
    ``WorkflowTypeContext``; checked with headless Chromium); ``searchFilter`` leaves out superseded runs
    (:data:`CURRENT_RUNS`).

    >>> browse("http://10.0.0.1:5000/", "3")
    'open http://10.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning&searchFilter=tags.%60schedlab.superseded_by%60%20IS%20NULL'
    >>> browse("sqlite:////d/mlflow.db", "3").split(", then open ")[0]
    'mlflow ui --backend-store-uri sqlite:////d/mlflow.db'
    """
    remote = StoreURI(uri).remote
    base = uri.rstrip("/") if remote else UI_ADDRESS
    link = (f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
            f"&searchFilter={quote(CURRENT_RUNS, safe='')}")
    return f"open {link}" if remote else f"mlflow ui --backend-store-uri {uri}, then open {link}"


def param_value(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, list | dict) else str(value)
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."


@cache
def git_commit() -> str:
    """The repository's commit (``-dirty`` with uncommitted changes), or ``unknown``."""
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=40"], cwd=root,
                             capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@dataclass(frozen=True)
class Claim:
    """A run created RUNNING before it runs (:mod:`sweeps.record`): its record is written into it."""

    run_id: str
    artifact_uri: str
    start_time: int  # ms, as MLflow stored it: the order of simultaneous claims (:func:`sweeps.record.claim_order`)


class MlflowStore:
    """One experiment in one tracking store, via ``MlflowClient`` (no global fluent state)."""

    def __init__(self, uri: str, experiment_name: str, artifact_root: str | None = None) -> None:
        from mlflow.tracking import MlflowClient

        self.uri, self.artifact_root = uri, artifact_root
        # a retry is no news, and a store call that fails for good is one line of ours, not MLflow's traceback
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
        with store_lock(uri):  # two processes creating one SQLite store's schema at once break it
            self.client = MlflowClient(tracking_uri=uri)
            self.client.search_experiments(max_results=1)  # MLflow creates (or migrates) the schema here
            database = StoreURI(uri).sqlite_file
            if database is not None:
                use_wal(database)
            self.experiment_id = self._experiment(experiment_name, artifact_root)

    def _experiment(self, name: str, artifact_root: str | None) -> str:
        """The experiment's id, creating it if needed (another process may create it at the same moment)."""
        from mlflow.exceptions import MlflowException

        experiment = self.client.get_experiment_by_name(name)
        if experiment is not None:
            return experiment.experiment_id
        location = (Path(artifact_root) / name.replace("/", "_")).resolve().as_uri() if artifact_root else None
        try:
            created = self.client.create_experiment(name, artifact_location=location)
        except MlflowException as error:
            if error.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            return self.client.get_experiment_by_name(name).experiment_id
        self._drop_empty_default(created)
        return created

    def _drop_empty_default(self, experiment_id: str) -> None:
        """A new store starts with MLflow's "Default" experiment (id 0); schedlab never uses it, so an
        empty one is deleted rather than shown in the UI's experiment list."""
        from mlflow.exceptions import MlflowException

        try:
            default = self.client.get_experiment("0") if experiment_id != "0" else None
        except MlflowException:  # a server whose store has no experiment 0
            return
        if default is not None and default.name == "Default" and default.lifecycle_stage == "active" \
                and not self.client.search_runs(["0"], max_results=1):
            self.client.delete_experiment("0")

    def runs_by_key(self, key: str | None = None) -> dict[str, list[Any]]:
        """Every run of the experiment that has a run key (or the key ``key``), grouped by key (one paged search)."""
        found: dict[str, list[Any]] = {}
        for run in self._search(f"tags.`{TAG}run_key` = '{key}'" if key else f"tags.`{TAG}run_key` != ''"):
            found.setdefault(run.data.tags[f"{TAG}run_key"], []).append(run)
        return found

    def running(self, tag: str, value: str) -> list[str]:
        """The ids of the experiment's RUNNING runs whose tag ``tag`` is ``value``."""
        return [run.info.run_id for run in self._search(f"tags.`{tag}` = '{value}' and attributes.status = 'RUNNING'")]

    def _search(self, where: str) -> Iterator[Any]:
        token = None
        while True:
            page = locked_retry(self.client.search_runs, [self.experiment_id], filter_string=where,
                                max_results=1000, page_token=token)
            yield from page
            token = page.token
            if not token:
                return

    def mark_killed(self, run_id: str) -> None:
        locked_retry(self.client.set_terminated, run_id, status="KILLED")

    def claim(self, tags: dict[str, str], run_name: str) -> Claim:
        """Create the run, RUNNING, before it runs."""
        created = locked_retry(self.client.create_run, self.experiment_id, tags=tags, run_name=run_name)
        return Claim(created.info.run_id, created.info.artifact_uri, created.info.start_time)

    def withdraw(self, run_id: str) -> None:
        """End a claim another sweep won (it never ran): KILLED, then deleted."""
        locked_retry(self.client.set_terminated, run_id, status="KILLED")
        locked_retry(self.client.delete_run, run_id)

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        locked_retry(self.client.set_tag, run_id, key, value)

    def supersede(self, run_id: str, name: str, by: str) -> None:
        """Mark a FINISHED run that the record ``by`` replaces: its tag :data:`SUPERSEDED_TAG` and its name."""
        self.set_tag(run_id, SUPERSEDED_TAG, by)
        locked_retry(self.client.update_run, run_id, name=f"{name} (superseded)")

    def sweeps(self) -> dict[str, str]:
        """The experiment's tags, where running sweeps keep their heartbeats (:mod:`sweeps.record`)."""
        return dict(locked_retry(self.client.get_experiment, self.experiment_id).tags)

    def set_sweep_tag(self, key: str, value: str | None) -> None:
        """Set (or, ``None``, delete) an experiment tag."""
        if value is None:
            with contextlib.suppress(Exception):  # gone already
                locked_retry(self.client.delete_experiment_tag, self.experiment_id, key)
        else:
            locked_retry(self.client.set_experiment_tag, self.experiment_id, key, value)

    def log(self, claim: Claim, status: str, end_time: float, params: dict[str, Any], tags: dict[str, str],
            metrics: dict[str, float], files: dict[str, bytes], tables: dict[str, dict[str, list[Any]]]) -> str:
        """Log an ended run into its claim: params, metrics and tags in one batch, its ``files`` (name → content)
        and ``tables`` (name → columns, written as Parquet), then its end
        status (FINISHED last, so a crash mid-way leaves the claim RUNNING for the next sweep to take over,
        never a false FINISHED). A claim that is no longer RUNNING was recorded already (a Ray retry of a
        run whose worker died after recording it) or taken over by a later sweep: left as it is. Each
        store call is retried while SQLite says another writer holds the lock."""
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        if locked_retry(self.client.get_run, claim.run_id).info.status != "RUNNING":
            return claim.run_id
        now = int(time.time() * 1000)
        locked_retry(self.client.log_batch, claim.run_id,
                     metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
                     params=[Param(k, param_value(v)) for k, v in params.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])
        with tempfile.TemporaryDirectory(prefix="schedlab-") as tmp:  # every file uploaded in one call
            for name, content in files.items():
                Path(tmp, name).write_bytes(content)
            if tables:
                import pyarrow as pa
                import pyarrow.parquet as pq

                for name, columns in tables.items():
                    pq.write_table(pa.table(columns), Path(tmp, f"{name}.parquet"))
            # the run's artifact repository, resolved as the client does but without its get_run query
            repository = get_artifact_repository(claim.artifact_uri, tracking_uri=self.uri)
            locked_retry(repository.log_artifacts, tmp)
        locked_retry(self.client.set_terminated, claim.run_id, status=status, end_time=int(end_time * 1000))
        return claim.run_id


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """An exclusive file lock beside a SQLite store (``mlflow.db.lock``) while a process opens it: the first
    one creates its schema, the others wait (two sweeps starting at once broke a new store, issue 26)."""
    database = StoreURI(uri).sqlite_file
    if database is None:
        yield
        return
    import fcntl

    lock = database.with_name(database.name + ".lock")
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: attempts and first backoff (seconds, doubling) of :func:`locked_retry`
LOCK_ATTEMPTS, LOCK_BACKOFF = 8, 0.05


def locked_retry(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)``, retried with exponential backoff (about 6 s in all) while it fails
    with SQLite's "database is locked" (another process writing the same store); other errors at once."""
    for attempt in range(LOCK_ATTEMPTS - 1):
        try:
            return call(*args, **kwargs)
        except Exception as error:
            if "database is locked" not in str(error):
                raise
        time.sleep(LOCK_BACKOFF * 2 ** attempt)
    return call(*args, **kwargs)


def use_wal(path: Path) -> None:
    """Switch a SQLite store to write-ahead logging (kept in the file): a commit appends to the log
    instead of rewriting journal and database (a run's logging took a third of the time, measured),
    and readers no longer block its writer. Left as it is when the file cannot be changed now. At this
    process's exit the log is written back into the file (``sweeps/run.py`` ends without closing MLflow's
    connections, whose close would do it), so that a copy of the file alone holds every run — passively:
    the exit never waits for another process's readers or writers (another sweep, ``mlflow ui``)."""
    _sqlite(path, "PRAGMA journal_mode=WAL")
    _checkpoint_at_exit(path)


@cache
def _checkpoint_at_exit(path: Path) -> None:
    atexit.register(_sqlite, path, "PRAGMA wal_checkpoint(PASSIVE)")


def _sqlite(path: Path, statement: str) -> None:
    with contextlib.closing(sqlite3.connect(path, timeout=10)) as db, contextlib.suppress(sqlite3.OperationalError):
        db.execute(statement)


@cache
def open_store(uri: str, experiment_name: str, artifact_root: str | None = None) -> MlflowStore:
    """One store per (uri, experiment) and process: serial runs reuse the connection."""
    return MlflowStore(uri, experiment_name, artifact_root)
