"""The one way a run is recorded: a :class:`RunRecord` made on the driver, written where it is cheapest, and the
:class:`RunReport` of what became of the run, made where it ran.

The driver knows everything about a run's record except its outcome (run key, fingerprints, params,
name); the process that ran it knows the outcome. A run is claimed before it runs (:mod:`sweeps.claims`:
its MLflow run created RUNNING), by the process that runs it when every such process sees the store (a
tracking server, SQLite beside a local Ray or in this process: :meth:`RunRecord.start`), else by the driver.
A process that sees the driver's store writes the record itself (:meth:`RunRecord.finish`); one on another
node of a cluster cannot see a SQLite file on the driver's disk, so the driver writes the same record from
the report handed back. Either way it is :meth:`RunRecord.write`.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

from sweeps._hydra import job_error
from sweeps.claims import RunResult, claim_run
from sweeps.identity import Fingerprint, changed_files
from sweeps.tracking import (
    INPUT_FILES_TAG,
    INPUTS_TAG,
    TAG,
    Claim,
    LoggedRun,
    MlflowStore,
    StoreURI,
    open_store,
    to_yaml,
)


@dataclass(frozen=True)
class StoreLocation:
    """Where a record goes, and how a process knows it sees the same store as the driver."""

    uri: str
    experiment_name: str
    artifact_root: str | None
    #: the driver's host and, for a SQLite store, (device, inode) of its file there
    host: str
    file_id: tuple[int, int] | None

    @classmethod
    def of(cls, uri: str, experiment_name: str, artifact_root: str | None) -> StoreLocation:
        return cls(uri, experiment_name, artifact_root, socket.gethostname(), _file_id(uri))

    def reachable(self) -> bool:
        """True when this process writes to the driver's store: a tracking server, or the same SQLite
        file on the same machine (a node of a cluster elsewhere has its own disk; and a worker never
        creates a store: the driver made it before the sweep started)."""
        if StoreURI(self.uri).remote:
            return True
        return socket.gethostname() == self.host and self.file_id is not None and _file_id(self.uri) == self.file_id

    def open(self) -> MlflowStore:
        return open_store(self.uri, self.experiment_name, self.artifact_root)


def _file_id(uri: str) -> tuple[int, int] | None:
    database = StoreURI(uri).sqlite_file
    try:
        stat = os.stat(database) if database is not None else None
    except OSError:
        return None
    return None if stat is None else (stat.st_dev, stat.st_ino)


@dataclass
class RunReport:
    """What became of one run, made where it ran (:meth:`of`) and read on the driver. ``status`` is FINISHED,
    FAILED or SKIPPED (another sweep claimed or finished it meanwhile; ``value`` is then its
    :class:`RunResult`); ``value`` is otherwise what the task function returned. ``recorded``: the MLflow
    run id when this process wrote the record; ``record_error``: why it could not."""

    status: str
    value: Any = None
    error: str | None = None
    traceback: str | None = None
    node_id: str = ""
    node_ip: str = ""
    seconds: float = 0.0
    start_time: float = 0.0  # epoch seconds
    end_time: float = 0.0
    working_dir: str | None = None
    task_name: str | None = None
    recorded: str | None = None
    record_error: str | None = None

    @classmethod
    def of(cls, ret: JobReturn, start: float, end: float, seconds: float, node_id: str, node_ip: str = ""
           ) -> RunReport:
        """The report of a job Hydra's ``run_job`` ran (a failure: its one-line error and its traceback)."""
        report = cls("FINISHED", None, node_id=node_id, node_ip=node_ip, seconds=seconds, start_time=start,
                     end_time=end, working_dir=ret.working_dir, task_name=ret.task_name)
        if ret.status == JobStatus.COMPLETED:
            report.value = ret.return_value
        else:
            report.fail(job_error(ret))
        return report

    @classmethod
    def crashed(cls, exc: BaseException, node_id: str = "", node_ip: str = "") -> RunReport:
        """The report of a run that failed outside its task function, now (it never started)."""
        now = time.time()
        report = cls("FINISHED", node_id=node_id, node_ip=node_ip, start_time=now, end_time=now)
        report.fail(exc)
        return report

    def fail(self, exc: BaseException) -> None:
        """Mark the report FAILED by ``exc``: its one-line error and its traceback."""
        self.status, self.error = "FAILED", one_line(exc)
        self.traceback = "".join(traceback.format_exception(exc))

    @property
    def outcome(self) -> Any:
        """The task function's :class:`sweeps.task.RunOutcome` of a FINISHED run, else ``None``."""
        return self.value if self.status == "FINISHED" else None


def metrics_of(outcome: Any) -> dict[str, float]:
    """A run's metrics as recorded (and as a recorded run gives them back): its outcome's summary and the
    simulation's wall time ``sim/seconds``."""
    return {**outcome.summary, "sim/seconds": outcome.seconds}


def one_line(exc: BaseException) -> str:
    """An exception as one line of at most 500 characters: its type and the first line of its message."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


@dataclass
class RunRecord:
    """A run's record before it ran (the driver makes it, :meth:`sweeps.planner.Planner.recorder`). Where the
    run runs, :meth:`start` claims it unless the driver did, and :meth:`finish` writes the record when the
    store is :meth:`~StoreLocation.reachable`."""

    store: StoreLocation
    claim: Claim | None  # None: claimed by start(), as the run starts
    cfg: dict[str, Any]
    tags: dict[str, str]
    params: dict[str, Any]
    claimant: dict[str, str] = field(default_factory=dict)  # the claiming sweep's tags (sweeps.claims)
    run_name: str = ""

    def start(self) -> RunResult | None:
        """Claim the run here unless the driver did: ``None`` to run it, else why another sweep has it."""
        if self.claim is not None:
            return None
        if not self.store.reachable():
            raise RuntimeError(f"this worker cannot reach the tracking store {self.store.uri} to claim the run")
        return self.claim_in(self.store.open())

    def claim_in(self, store: MlflowStore) -> RunResult | None:
        """Claim the run in ``store`` (:func:`sweeps.claims.claim_run`; the driver's and the worker's one
        path): ``None`` when it is claimed here (``claim`` set), else why another sweep has it."""
        claimed = claim_run(store, {**self.tags, **self.claimant}, self.run_name, self.cfg.get("sweep") or {})
        if isinstance(claimed, RunResult):
            return claimed
        self.claim = claimed
        return None

    def finish(self, report: RunReport) -> None:
        """Write the record of an ended run here when this process sees the store (``report.recorded``, or
        ``report.record_error``); a recorded outcome then travels back without its tables and files."""
        if not self.store.reachable():
            return
        try:
            report.recorded = self.write(report)
        except Exception as error:
            report.record_error = one_line(error)
            return
        if report.outcome is not None:
            report.value = dataclasses.replace(report.outcome, tables={}, files={})

    def write(self, report: RunReport) -> str:
        """Log the ended run into its claim; its MLflow run id."""
        assert self.claim is not None, "a run is claimed before it is recorded"
        tags = {**self.tags, f"{TAG}ray_node": report.node_id}
        if report.node_ip:
            tags[f"{TAG}ray_node_ip"] = report.node_ip
        if report.error:
            tags[f"{TAG}error"] = report.error.splitlines()[0][:5000]
        metrics: dict[str, float] = {}
        params = dict(self.params)
        outcome = report.outcome
        if outcome is not None:
            metrics = metrics_of(outcome)
            tags.update(read_inputs(self.tags, outcome.inputs))
            tags.update({f"{TAG}note.{k}": str(v) for k, v in outcome.notes.items()})
            if outcome.nodes_from_workload is not None:
                params["cluster.nodes"] = outcome.nodes_from_workload  # the size the trace header gave
        return self.store.open().log(LoggedRun(
            params=params, tags=tags, metrics=metrics, status=report.status, end_time=report.end_time,
            config_yaml=to_yaml(self.cfg), tables=outcome.tables if outcome is not None else {},
            files=outcome.files if outcome is not None else {}, traceback=report.traceback), self.claim)


def read_inputs(planned: dict[str, str], read: dict[str, str]) -> dict[str, str]:
    """The input tags of what a run read (``read``: sha256 by file name); when that is not what the sweep
    planned with, the planned digest and the files that differ are kept beside them.

    >>> planned = {"schedlab.inputs": Fingerprint({"a": "0" * 64}).digest}
    >>> read_inputs(planned, {"a": "0" * 64})
    {}
    >>> sorted(read_inputs(planned, {"a": "1" * 64}))
    ['schedlab.input_files', 'schedlab.inputs', 'schedlab.inputs_changed', 'schedlab.inputs_planned']
    """
    if not read:
        return {}
    now = Fingerprint(read)
    if now.digest == planned.get(INPUTS_TAG):
        return {}
    tags = {INPUTS_TAG: now.digest, f"{TAG}inputs_planned": planned.get(INPUTS_TAG, "")}
    if now.manifest:
        tags[INPUT_FILES_TAG] = now.manifest
    changed = changed_files(planned.get(INPUT_FILES_TAG), read)
    tags[f"{TAG}inputs_changed"] = ", ".join(changed) if changed else "?"
    return tags
