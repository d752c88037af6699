"""The one way a run is recorded: a :class:`RunRecord` made on the driver, written where it is cheapest.

The driver knows everything about a run's record except its outcome (run key, fingerprints, params,
name) and claimed the run before it started (:mod:`sweeps.claims`: the MLflow run exists, RUNNING);
the worker that ran it knows the outcome. A Ray worker that sees the driver's store (a tracking server,
or SQLite on the driver's machine) writes the record itself, and when every worker sees it (a tracking
server, or a local Ray instance) also claims the run as it starts (:meth:`RunRecord.start`): the driver's
CPU is then spent on planning, not on MLflow calls (~8 ms per claim, ~40 per record: the limit of one
driver). A worker elsewhere cannot see a SQLite store on the driver's disk: the driver claims its run and
writes the same record from the outcome handed back. Either way it is :meth:`RunRecord.write`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from sweeps.claims import Recorded, claim_run
from sweeps.identity import Fingerprint, changed_files
from sweeps.task import RunOutcome
from sweeps.tracking import TAG, Claim, LoggedRun, MlflowStore, open_store, semantic_config, to_yaml

REMOTE_SCHEMES = ("http", "https")
CODE_TAG, CODE_FILES_TAG = f"{TAG}code", f"{TAG}code_files"
INPUTS_TAG, INPUT_FILES_TAG = f"{TAG}inputs", f"{TAG}input_files"


@dataclass(frozen=True)
class StoreLocation:
    """Where a record goes, and how a worker knows it sees the same store as the driver."""

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
        if urlparse(self.uri).scheme in REMOTE_SCHEMES:
            return True
        return socket.gethostname() == self.host and self.file_id is not None and _file_id(self.uri) == self.file_id


def _file_id(uri: str) -> tuple[int, int] | None:
    if not uri.startswith("sqlite:///"):
        return None
    try:
        stat = os.stat(uri.removeprefix("sqlite:///"))
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


@dataclass
class RunRecord:
    """A run's record before it ran. On the worker, :meth:`start` claims the run unless the driver did, and
    calling it with the run's report (``status``, ``value``, ``error``, ``traceback``, ``node_id``,
    ``node_ip``, ``end_time``) writes the record when the store is :meth:`~StoreLocation.reachable` and
    returns the MLflow run id (else ``None``: the driver writes it)."""

    store: StoreLocation
    claim: Claim | None  # None: claimed by start(), as the run starts
    cfg: dict[str, Any]
    tags: dict[str, str]
    params: dict[str, Any]
    claimant: dict[str, str] = field(default_factory=dict)  # the claiming sweep's tags (sweeps.claims)
    run_name: str = ""

    def start(self) -> Recorded | None:
        """Claim the run here unless the driver did: ``None`` to run it, else why another sweep has it."""
        if self.claim is not None:
            return None
        if not self.store.reachable():
            raise RuntimeError(f"this worker cannot reach the tracking store {self.store.uri} to claim the run")
        return self.claim_in(open_store(self.store.uri, self.store.experiment_name, self.store.artifact_root))

    def claim_in(self, store: MlflowStore) -> Recorded | None:
        """Claim the run in ``store`` (:func:`sweeps.claims.claim_run`; the driver's and the worker's one
        path): ``None`` when it is claimed here (``claim`` set), else why another sweep has it."""
        sweep = self.cfg.get("sweep") or {}
        claimed = claim_run(store, self.tags[f"{TAG}run_key"], {**self.tags, **self.claimant}, self.run_name,
                            lambda finished: reusable(finished, self.tags, sweep))
        if isinstance(claimed, Recorded):
            return claimed
        self.claim = claimed
        return None

    def __call__(self, report: Any) -> str | None:
        if not self.store.reachable():
            return None
        return self.write(report.status, report.value if report.status == "FINISHED" else None, report.error,
                          report.traceback, report.node_id, report.end_time, report.node_ip)

    def write(self, status: str, outcome: RunOutcome | None, error: str | None, traceback: str | None, node: str,
              end: float, node_ip: str = "") -> str:
        """Log the ended run into its claim; its MLflow run id."""
        assert self.claim is not None, "a run is claimed before it is recorded"
        store = open_store(self.store.uri, self.store.experiment_name, self.store.artifact_root)
        tags = {**self.tags, f"{TAG}ray_node": node}
        if node_ip:
            tags[f"{TAG}ray_node_ip"] = node_ip
        if error:
            tags[f"{TAG}error"] = error.splitlines()[0][:5000]
        metrics: dict[str, float] = {}
        params = dict(self.params)
        if outcome is not None:
            metrics = {**outcome.summary, "sim/seconds": outcome.seconds}
            tags.update(read_inputs(self.tags, outcome.inputs))
            tags.update({f"{TAG}note.{k}": str(v) for k, v in outcome.notes.items()})
            if outcome.nodes_from_workload is not None:
                params["cluster.nodes"] = outcome.nodes_from_workload  # the size the trace header gave
        return store.log(LoggedRun(
            params=params, tags=tags, metrics=metrics, status=status, end_time=end, config_yaml=to_yaml(self.cfg),
            tables=outcome.tables if outcome is not None else {}, files=outcome.files if outcome is not None else {},
            traceback=traceback), self.claim)


def reusable(finished: list[Any], tags: dict[str, str], sweep: dict[str, Any]) -> list[Any]:
    """The FINISHED runs that stand for a run with identity ``tags``: with ``sweep.reuse=same`` only those
    of its code and inputs, with ``any`` all of them; none with ``sweep.force=true``."""
    if sweep.get("force", False):
        return []
    return [r for r in finished if sweep.get("reuse", "same") == "any"
            or all(r.data.tags.get(tag) == tags[tag] for tag in (CODE_TAG, INPUTS_TAG))]


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


def run_params(cfg: dict[str, Any], non_semantic: Iterable[str], label: str) -> dict[str, Any]:
    """The MLflow params: the semantic config (``_target_`` class paths included) and the policy's label as
    ``policy``.

    >>> run_params({"policy": {"_target_": "x.Easy", "window": "head"}, "tracking": {"uri": "u"}}, ["tracking"], "easy")
    {'policy': 'easy', 'policy._target_': 'x.Easy', 'policy.window': 'head'}
    """
    return {"policy": label, **semantic_config(cfg, non_semantic)}


def targets(cfg: dict[str, Any]) -> dict[str, str]:
    """The class or factory each config group builds, by group (``{"policy": "sim.policies…"}``)."""
    return {group: str(node["_target_"]) for group, node in cfg.items()
            if isinstance(node, dict) and "_target_" in node}

