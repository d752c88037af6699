"""One run: a resolved config (a plain dict) in, summary metrics and the per-job table out.

The launcher and the planner are generic; this module is the only place that knows how a config
becomes a simulation. Group nodes carry a ``_target_``, so the simulator never sees a ``DictConfig``:
clusters and workloads are built by Hydra's ``instantiate``, the policy by :func:`sim.policies.loading.build_policy`
(the same loader as ``python -m sim --policy``: a target that cannot be imported, options its class does not
take or a class missing a protocol method are one line, on the driver before anything runs).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from sim.core import Cluster, InputError
from sim.engine import OversizedJobError
from sim.policies.base import EngineView
from sim.policies.loading import build_policy
from sim.run import check_kind, run
from sim.workflows.metrics import TASK_COLUMNS
from sweeps.identity import sha256_file
from sweeps.specs import TRACE_SOURCES

#: The artifact holding a run's drawn workflow stream (``workload.save_stream=true``).
STREAM_ARTIFACT = "workflow_stream.json"
#: The artifact holding a workflow run's per-task table (``workload.save_tasks=true``).
TASKS_ARTIFACT = "tasks.parquet"

#: Top-level keys a run config may have (a misspelled key in an experiment file is an error).
TOP_LEVEL_KEYS = frozenset(
    {"seed", "experiment_name", "cluster", "workload", "policy", "engine", "tracking", "sweep", "replications",
     "paper"})  # paper: how make paper presents an experiment (analysis/paper.py), never part of a run


@dataclass
class RunOutcome:
    """What a worker sends back: the summary metrics, the job table and what reading taught us."""

    summary: dict[str, float]
    #: column tables saved as ``<name>.parquet`` artifacts (the workload kind's, see ``sim.run``)
    tables: dict[str, dict[str, list[Any]]]
    notes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: artifact files, name → content: ``workflow_stream.json`` when ``workload.save_stream`` is true,
    #: ``tasks.parquet`` when ``workload.save_tasks`` is
    files: dict[str, bytes] = field(default_factory=dict)
    #: the machine's node count when the workload sized it (``cluster=from_trace``), else ``None``
    nodes_from_workload: int | None = None
    #: sha256 of each input file as this run read it (by the user's name of the file)
    inputs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunParts:
    """The validated, not yet built, pieces of one run."""

    seed: int
    cluster: Any
    workload: Any
    kill_at_limit: bool
    drop_oversized: bool
    #: the files the run reads, by the user's name: its workload's, then its policy's (``policy:NAME``)
    inputs: dict[str, Path]


def prepare(cfg: dict[str, Any]) -> RunParts:
    """Check a run config without simulating, on the driver (cheap; raises :class:`InputError` with a clear
    message): its parts, and that its policy builds and fits its workload and cluster."""
    parts = _parts(cfg)  # unknown policy names and options fail here, on the driver
    policy = _built("policy", cfg)
    check_kind(policy, parts.workload.kind)
    if not parts.cluster.fixed and not parts.workload.sizes_machine:
        raise InputError(f"cluster.nodes is null (cluster=from_trace takes the size from a trace header) but "
                         f"workload {type(parts.workload).__name__} reads no trace; pick a sized cluster "
                         f"(cluster=hpc128) or set cluster.nodes=N")
    if parts.cluster.fixed:
        cluster = parts.cluster.build()
        _check_fit(policy, cluster)
        if parts.workload.kind == "workflow":  # workflows run on m resources × c_r slots
            cluster.slotted_shape(f"workload {cfg['workload'].get('type', 'workflow_file')}")
    return parts


def _parts(cfg: dict[str, Any]) -> RunParts:
    """A run's seed, engine options and cluster and workload specs (each spec built once per process)."""
    unknown = sorted(set(cfg) - TOP_LEVEL_KEYS)
    if unknown:
        raise InputError(f"unknown top-level config key(s) {unknown}; expected {sorted(TOP_LEVEL_KEYS)}")
    seed = cfg.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    engine = dict(cfg.get("engine") or {})
    extra = sorted(set(engine) - {"kill_at_limit", "drop_oversized"})
    if extra:
        raise InputError(f"unknown engine option(s) {extra}; expected kill_at_limit, drop_oversized")
    workload, policy = _built("workload", cfg), _built("policy", cfg)
    own = policy.input_files() if hasattr(policy, "input_files") else {}
    return RunParts(seed=seed, cluster=_built("cluster", cfg), workload=workload,
                    kill_at_limit=bool(engine.get("kill_at_limit", False)),
                    drop_oversized=bool(engine.get("drop_oversized", False)),
                    inputs={**workload.input_files(), **{f"policy:{name}": path for name, path in own.items()}})


def _check_fit(policy: Any, cluster: Cluster) -> None:
    """A policy that cannot schedule on this kind of cluster (e.g. EASY on cpu+mem) fails on the driver."""
    try:
        policy.attach(EngineView(cluster, [list(capacity) for capacity in cluster.machines]))
    except ValueError as error:
        capacity = dict(zip(cluster.resources, cluster.total, strict=True))
        raise InputError(f"policy {policy.name!r} does not fit cluster {capacity} × {len(cluster.machines)} "
                         f"machine(s): {error}") from None


def run_one(cfg: dict[str, Any]) -> RunOutcome:
    """Simulate one run of a config :func:`prepare` checked on the driver; the workload depends only on
    ``seed`` and the workload config, the policy is built once, here.

    The input files are hashed here, where they are read: before and after the workload and the policy read them, so
    the digest recorded is that of the bytes parsed (a file that changes while it is read fails the run)."""
    parts = _parts(cfg)
    tic = time.perf_counter()
    cluster = parts.cluster.build() if parts.cluster.fixed else None
    read = file_digests(parts.inputs)
    workload = parts.workload.build(np.random.default_rng(parts.seed), cluster)
    sized = None if cluster else workload.default_nodes
    cluster = cluster or parts.cluster.build(workload.default_nodes)
    policy = _instantiate("policy", cfg, weights=getattr(workload, "weights", None))
    after = file_digests(parts.inputs)
    if after != read:
        changed = sorted(name for name, digest in after.items() if read.get(name) != digest)
        raise InputError(f"input file {', '.join(changed)} changed while this run read it; rerun the sweep")
    files: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="schedlab-run-") as tmp:
        saves_tasks = getattr(parts.workload, "save_tasks", False)
        tasks = ParquetRows(Path(tmp) / TASKS_ARTIFACT, TASK_COLUMNS) if saves_tasks else None
        try:
            done = run(workload, cluster, policy, kill_at_limit=parts.kill_at_limit,
                       drop_oversized=parts.drop_oversized, tasks=tasks)
        except OversizedJobError as error:
            fix = "engine.drop_oversized=true"
            raise InputError(error.describe(workload.source, workload.lines.get(error.job_id), fix)) from None
        seconds = time.perf_counter() - tic
        if tasks is not None:
            files[TASKS_ARTIFACT] = tasks.close().read_bytes()
        if getattr(parts.workload, "save_stream", False):  # the file ``python -m sim STREAM.json`` replays
            stream = parts.workload.stream_file(workload, cluster, Path(tmp) / STREAM_ARTIFACT)
            files[STREAM_ARTIFACT] = stream.read_bytes()
    return RunOutcome(summary=done.summary, tables=done.tables, notes=done.notes, seconds=seconds, files=files,
                      nodes_from_workload=sized, inputs=read)


class ParquetRows:
    """A task sink writing rows to a Parquet file as they are produced, ``batch`` rows per row group;
    :meth:`close` writes the rest and returns the path."""

    def __init__(self, path: Path, columns: Sequence[str], batch: int = 65_536) -> None:
        self.path, self.columns, self.batch = path, tuple(columns), batch
        self._rows: list[Sequence[Any]] = []
        self._writer: Any = None

    def __call__(self, row: Sequence[Any]) -> None:
        self._rows.append(row)
        if len(self._rows) >= self.batch:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({name: [row[k] for row in self._rows] for k, name in enumerate(self.columns)})
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, table.schema)
        self._writer.write_table(table.cast(self._writer.schema))
        self._rows.clear()

    def close(self) -> Path:
        if self._rows or self._writer is None:
            self._flush()
        self._writer.close()
        return self.path


def file_digests(files: dict[str, Path]) -> dict[str, str]:
    """sha256 of each file, read now (by the user's name of the file)."""
    return {name: sha256_file(path) for name, path in files.items()}


def check_inputs(parts: RunParts) -> None:
    """Read a run's input files as the worker will (a replay's workload built once, with seed 0; a drawn one's
    ``check_files``): a bad line of a trace stops the sweep on the driver, before Ray starts, instead of
    failing every run in a worker."""
    if parts.workload.stochastic:
        parts.workload.check_files()
    else:
        parts.workload.build(np.random.default_rng(0), parts.cluster.build() if parts.cluster.fixed else None)


_BUILT: dict[tuple[str, str], Any] = {}
_MAX_BUILT = 1024


def _built(group: str, cfg: dict[str, Any]) -> Any:
    """:func:`_instantiate`, once per distinct sub-config in this process.

    The runs of a sweep mostly share their cluster, workload and policy configs; specs are immutable,
    and the policy built here is only checked (:func:`run_one` builds each run's own).
    """
    key = (group, repr(cfg.get(group)))
    if key not in _BUILT:
        if len(_BUILT) >= _MAX_BUILT:
            _BUILT.clear()
        _BUILT[key] = _instantiate(group, cfg)
    return _BUILT[key]


def _instantiate(group: str, cfg: dict[str, Any], weights: dict[str, float] | None = None) -> Any:
    """Build a group's ``_target_``; a policy with ``weights: null`` takes the workload's ``weights``."""
    node = cfg.get(group)
    if not isinstance(node, dict) or "_target_" not in node:
        raise InputError(f"config group {group!r} must be a mapping with a _target_ (choose one with {group}=NAME)")
    missing = [key for key, value in node.items() if value == "???"]
    if missing:
        hint = f"; {TRACE_SOURCES}" if group == "workload" else ""
        raise InputError(f"{group}.{missing[0]} is required: pass {group}.{missing[0]}=VALUE{hint}")
    if weights is not None and "weights" in node and node["weights"] is None:
        node = {**node, "weights": weights}
    if group == "policy":
        return build_policy(str(node["_target_"]), {k: v for k, v in node.items() if k != "_target_"})
    try:
        return instantiate(node, _convert_="all")
    except InstantiationException as e:
        cause = e.__cause__
        if isinstance(cause, InputError):
            raise cause from None
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(e)
        raise InputError(f"{group}: cannot build {node['_target_']}: {detail}") from None
