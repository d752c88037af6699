"""The driver side of a sweep: validate every run, skip finished ones, log each result to MLflow.

:class:`SweepTracker` is the only recorder: the Ray launcher's ``hook`` (``hydra.launcher.hook``), and
driven by :class:`sweeps.recording.Recording` for single runs and Hydra's basic launcher.
"""

from __future__ import annotations

import importlib.metadata
import sys
import uuid
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from hydra_plugins.schedlab_ray_launcher.hooks import PlannedRun, RunReport, SweepAbortedError, SweepStats
from sim.core import InputError
from sweeps import task
from sweeps.summary import format_policy_table
from sweeps.tracking import TAG, LoggedRun, MlflowStore, flatten, git_commit, open_store, run_key, to_yaml

DEFAULT_NON_SEMANTIC = ("tracking", "sweep", "experiment_name", "replications", "workload.base_dir")


def task_config(cfg: DictConfig) -> dict[str, Any]:
    """The run's resolved config as a plain dict, without the ``hydra`` node."""
    plain: dict[str, Any] = {}
    for key in cfg:
        if key == "hydra":
            continue
        value = OmegaConf.select(cfg, str(key), throw_on_missing=False)
        plain[str(key)] = (OmegaConf.to_container(value, resolve=True, throw_on_missing=False)
                           if isinstance(value, DictConfig | ListConfig) else value)
    return plain


@cache
def schedlab_version() -> str:
    try:
        return importlib.metadata.version("schedlab")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class SweepTracker:
    """Validates, de-duplicates and records runs; one instance per sweep, on the driver."""

    def __init__(self, summary: bool = True) -> None:
        self.summary = summary
        self.sweep_id = f"{datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.store: MlflowStore | None = None
        self.cfgs: dict[int, dict[str, Any]] = {}
        self.keys: dict[int, str] = {}
        self.results: list[tuple[dict[str, Any], dict[str, float]]] = []
        self.run_ids: dict[int, str] = {}

    # -- the SweepHook protocol -------------------------------------------------------------
    def validate(self, config: DictConfig, runs: Sequence[PlannedRun]) -> None:
        self.cfgs = {run.index: task_config(run.config) for run in runs}
        errors: dict[str, list[PlannedRun]] = {}
        for run in runs:
            try:
                task.prepare(self.cfgs[run.index])
            except InputError as e:
                errors.setdefault(str(e), []).append(run)
        if errors:
            lines = [f"{message}\n    ({_which(bad, len(runs))})" for message, bad in errors.items()]
            raise SweepAbortedError("invalid configuration, nothing was run:\n  " + "\n  ".join(lines))

    def plan(self, runs: Sequence[PlannedRun]) -> list[str | None]:
        return self.plan_configs({run.index: self.cfgs[run.index] for run in runs})

    def on_result(self, report: RunReport) -> None:
        outcome = report.value if report.status == "FINISHED" else None
        self.record(report.run.index, report.status, outcome, report.error, report.traceback,
                    node=report.node_id, start=report.start_time, end=report.end_time,
                    label=report.run.label, node_ip=report.node_ip)

    def finish(self, stats: SweepStats) -> None:
        if self.summary and self.results:
            print(format_policy_table(self.results))
        if self.store is not None:
            print(f"MLflow: experiment {self.experiment_name!r} in {self.store.uri} (sweep {self.sweep_id}); "
                  f"browse with: mlflow ui --backend-store-uri {self.store.uri}")
        sys.stdout.flush()

    # -- plain-dict core, shared with in-process runs --------------------------------------------
    def plan_configs(self, cfgs: dict[int, dict[str, Any]]) -> list[str | None]:
        """Per run: ``None`` to run it, or why it is skipped (finished before, or a duplicate)."""
        self.cfgs.update(cfgs)
        first = next(iter(cfgs.values()))
        sweep = first.get("sweep") or {}
        non_semantic = sweep.get("non_semantic") or DEFAULT_NON_SEMANTIC
        self.keys.update({i: run_key(cfg, non_semantic) for i, cfg in cfgs.items()})
        self.experiment_name = str(first.get("experiment_name") or "Default")
        tracking = first.get("tracking") or {}
        existing: dict[str, list[Any]] = {}
        if tracking.get("uri"):
            self.store = open_store(str(tracking["uri"]), self.experiment_name, tracking.get("artifact_root"))
            existing = self.store.runs_by_key()
        wanted = {self.keys[i] for i in cfgs}
        for key in wanted & set(existing):  # left RUNNING by a driver that was killed while logging
            for run in existing[key]:
                if run.info.status == "RUNNING":
                    self.store.mark_killed(run.info.run_id)
        decisions: list[str | None] = []
        seen: dict[str, int] = {}
        for i, cfg in cfgs.items():
            key = self.keys[i]
            finished = [r for r in existing.get(key, []) if r.info.status == "FINISHED"]
            if key in seen:
                decisions.append(f"same run as #{seen[key]}")
            elif finished and not sweep.get("force", False):
                decisions.append(f"finished in MLflow run {finished[0].info.run_id}")
                self.results.append((cfg, dict(finished[0].data.metrics)))
            else:
                decisions.append(None)
            seen.setdefault(key, i)
        return decisions

    def record(self, index: int, status: str, outcome: task.RunOutcome | None, error: str | None,
               traceback: str | None, node: str, start: float, end: float, label: str, node_ip: str = "") -> None:
        """Log one ended run (the driver's only write per run)."""
        cfg = self.cfgs[index]
        metrics = dict(outcome.summary) if outcome is not None else {}
        if outcome is not None:
            metrics["sim/seconds"] = outcome.seconds
            self.results.append((cfg, dict(outcome.summary)))
        if self.store is None:
            return
        tags = {f"{TAG}run_key": self.keys[index], f"{TAG}sweep_id": self.sweep_id, f"{TAG}git_commit": git_commit(),
                f"{TAG}version": schedlab_version(), f"{TAG}ray_node": node}
        if node_ip:
            tags[f"{TAG}ray_node_ip"] = node_ip
        if error:
            tags[f"{TAG}error"] = error.splitlines()[0][:5000]
        if outcome is not None and outcome.notes:
            tags.update({f"{TAG}note.{k}": str(v) for k, v in outcome.notes.items()})
        self.run_ids[index] = self.store.log(LoggedRun(
            params=flatten(cfg), tags=tags, metrics=metrics, status=status, run_name=label.replace(" ", ","),
            start_time=start, end_time=end, config_yaml=to_yaml(cfg),
            tables=outcome.tables if outcome is not None else {}, files=outcome.files if outcome is not None else {},
            traceback=traceback))


def _which(bad: Sequence[PlannedRun], total: int) -> str:
    if len(bad) == total:
        return f"all {total} runs"
    return f"{len(bad)} of {total} runs, e.g. #{bad[0].index}: {bad[0].label}"

