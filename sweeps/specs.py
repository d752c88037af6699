"""What a config group's ``_target_`` builds: small validated specs for clusters and workloads.

Constructing a spec only checks its values (cheap: the driver does it for every run before Ray
starts); :meth:`build` does the real work in the worker. Every workload is drawn from the
``numpy.random.Generator`` it is handed, which is seeded from the replication seed alone, so every
policy sees the same jobs for a seed (common random numbers).

Every workload spec declares its ``kind`` (metric set and fitting policies), whether it is
``stochastic`` (a replay is not: the driver runs one seed per cell), whether it ``sizes_machine``
(gives ``cluster=from_trace`` its size) and the ``input_files()`` a run reads (hashed into the
run's identity, :mod:`sweeps.identity`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sim.core import Cluster, InputError, Workload
from sim.workflows.files import read_stream, write_stream
from sim.workflows.generators import GENERATORS, size_mix
from sim.workflows.limits import MAX_TASKS, check_system
from sim.workflows.mapreduce import MapReduceShape, mapreduce_stream
from sim.workflows.stream import check_stream, workflow_stream
from sim.workflows.wfformat import read_wfformat, wfformat_stream
from sim.workloads import FORMATS, load_trace, synthetic_hpc
from sim.workloads.errors import check_rate
from sim.workloads.multires import multires_cluster, multires_workload

TRACE_SOURCES = (
    "no trace ships with schedlab: download SWF logs from the Parallel Workloads Archive "
    "(https://www.cs.huji.ac.il/labs/parallel/workload/logs.html) and DR_EVT CSV traces from LLNL's "
    "DR_EVT project (https://github.com/LLNL/DR_EVT), then pass workload.path=/path/to/file"
)


@dataclass(frozen=True)
class NodeCluster:
    """A homogeneous machine of ``nodes`` nodes; ``None`` takes the size from the trace header."""

    nodes: int | None = 128

    def __post_init__(self) -> None:
        if self.nodes is not None and (not isinstance(self.nodes, int) or self.nodes <= 0):
            raise InputError(f"cluster.nodes must be a positive integer (or null for the trace's size), "
                             f"got {self.nodes!r}")

    @property
    def fixed(self) -> bool:
        """Whether the machine is known before the workload is read."""
        return self.nodes is not None

    def build(self, workload_nodes: int | None = None) -> Cluster:
        nodes = self.nodes or workload_nodes
        if not nodes:
            raise InputError("cluster.nodes is null and the workload does not give a machine size; "
                             "set cluster.nodes=N")
        return Cluster.nodes(nodes)


@dataclass(frozen=True)
class ResourceCluster:
    """``machines`` identical machines with named capacities, e.g. ``{cpu: 9, mem: 18}`` (DRF-style)."""

    resources: dict[str, float] = field(default_factory=dict)
    machines: int = 1

    def __post_init__(self) -> None:
        if not self.resources or any(not v or v <= 0 for v in self.resources.values()) or self.machines <= 0:
            raise InputError(f"cluster: need positive resource capacities and machines, got "
                             f"resources={self.resources!r} machines={self.machines!r}")

    fixed = True

    def build(self, workload_nodes: int | None = None) -> Cluster:
        return multires_cluster({k: float(v) for k, v in self.resources.items()}, self.machines)


@dataclass(frozen=True)
class SyntheticHpc:
    """Poisson arrivals at ``arrival_rate`` jobs/s; widths and run times from a simplified
    Lublin–Feitelson model; time limit = run time × U(1, ``estimate_factor_max``)
    (see :mod:`sim.workloads.synthetic`)."""

    kind = "hpc"  # the metric set and the policies that fit (sim.run)
    stochastic = True  # drawn from the seed's generator: each seed is a replication
    sizes_machine = False

    jobs: int = 1000
    arrival_rate: float = 0.01
    estimate_factor_max: float = 5.0

    def __post_init__(self) -> None:
        if not isinstance(self.jobs, int) or self.jobs <= 0:
            raise InputError(f"workload.jobs must be a positive integer, got {self.jobs!r}")
        if not _positive(self.arrival_rate):
            raise InputError(f"workload.arrival_rate must be a positive number of jobs per second, "
                             f"got {self.arrival_rate!r}")
        check_rate(self.jobs, self.arrival_rate, "workload.arrival_rate")
        if not _positive(self.estimate_factor_max) or self.estimate_factor_max < 1:
            raise InputError(f"workload.estimate_factor_max must be ≥ 1, got {self.estimate_factor_max!r}")

    def input_files(self) -> dict[str, Path]:
        return {}

    def build(self, rng: np.random.Generator, cluster: Cluster | None) -> Workload:
        if cluster is None or len(cluster.resources) != 1:
            raise InputError("synthetic_hpc needs a node-count machine: pick a cluster with nodes set")
        return synthetic_hpc(rng, jobs=self.jobs, nodes=cluster.node_count, arrival_rate=float(self.arrival_rate),
                             estimate_factor_max=float(self.estimate_factor_max))


@dataclass(frozen=True)
class MMcQueue(SyntheticHpc):
    """An M/M/c queue on the cluster's c nodes: Poisson arrivals, one-node jobs, exponential run times
    of mean ``mean_runtime`` s, so the mean wait has a closed form (:func:`sim.workloads.synthetic.erlang_c_wait`)."""

    mean_runtime: float = 100.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _positive(self.mean_runtime):
            raise InputError(f"workload.mean_runtime must be a positive number of seconds, got {self.mean_runtime!r}")

    def build(self, rng: np.random.Generator, cluster: Cluster | None) -> Workload:
        from sim.workloads.synthetic import mmc_jobs

        if cluster is None or len(cluster.resources) != 1:
            raise InputError("mmc needs a node-count machine: pick a cluster with nodes set")
        return mmc_jobs(rng, jobs=self.jobs, nodes=cluster.node_count, arrival_rate=float(self.arrival_rate),
                        mean_runtime=float(self.mean_runtime), estimate_factor_max=float(self.estimate_factor_max))


class _OneFile:
    """A workload read from one file: ``path`` (as the user wrote it) under ``base_dir``."""

    path: str
    base_dir: str

    @property
    def file(self) -> Path:
        return Path(self.base_dir).expanduser() / Path(self.path).expanduser()

    def input_files(self) -> dict[str, Path]:
        """The files a run reads, by the name the user gave."""
        return {self.path: self.file}


@dataclass(frozen=True)
class TraceFile(_OneFile):
    """A trace file in one of :data:`sim.workloads.FORMATS`; a relative ``path`` is read from
    ``base_dir`` (the directory the sweep was launched from)."""

    kind = "hpc"  # the metric set and the policies that fit (sim.run)
    stochastic = False  # a replay: every seed gives the same run
    sizes_machine = True  # the header's size is the machine for cluster=from_trace

    path: str
    format: str | None = None
    base_dir: str = "."

    def __post_init__(self) -> None:
        if self.format is not None and self.format not in FORMATS:
            raise InputError(f"workload.format must be one of {', '.join(FORMATS)}, got {self.format!r}")
        if not self.path or self.path == "???":
            raise InputError(f"workload.path is required for a trace workload; {TRACE_SOURCES}")
        if not self.file.is_file():
            raise InputError(f"trace file not found: {self.file}; {TRACE_SOURCES}")

    def build(self, rng: np.random.Generator, cluster: Cluster | None) -> Workload:
        return load_trace(self.file, self.format)


@dataclass(frozen=True)
class MultiResTasks:
    """Synthetic multi-resource tasks per user (DRF-style; see :mod:`sim.workloads.multires`):
    ``users`` maps a user to ``{demand, tasks, rate, duration, weight, …}``; demands are over the
    cluster's resources (pair with a :class:`ResourceCluster`)."""

    kind = "multires"  # the metric set and the policies that fit (sim.run)
    stochastic = True
    sizes_machine = False

    users: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.users:
            raise InputError("workload.users must name at least one user with its task spec")

    def input_files(self) -> dict[str, Path]:
        return {}

    def build(self, rng: np.random.Generator, cluster: Cluster | None) -> Workload:
        return multires_workload(rng, users=self.users, cluster=cluster)


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class SlottedCluster:
    """RM-DCWF's system: ``m`` identical resources running at most ``c_r`` tasks each."""

    m: int = 50
    c_r: int = 2

    fixed = True

    def __post_init__(self) -> None:
        for name in ("m", "c_r"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InputError(f"cluster.{name} must be a positive integer, got {value!r}")
        check_system(self.m, self.c_r, "cluster.")

    def build(self, workload_nodes: int | None = None) -> Cluster:
        return Cluster.slotted(self.m, self.c_r)


def _shape(cluster: Cluster | None, workload: str) -> tuple[int, int]:
    if cluster is None:  # cluster=from_trace: refused on the driver by sweeps.task.prepare
        raise InputError(f"{workload} needs a slotted cluster (cluster=rmdcwf)")
    return cluster.slotted_shape(workload)


@dataclass(frozen=True)
class _StreamParams:
    """The open-stream parameters shared by generated and WfFormat streams (see
    :mod:`sim.workflows.stream`)."""

    kind = "workflow"  # the metric set and the policies that fit (sim.run)
    stochastic = True  # arrivals (and generated or drawn workflows) come from the seed's generator
    sizes_machine = False

    arrival_rate: float = 1 / 180
    s_max: int = 50_000
    em_max: float = 5.0
    jobs: int = 2000
    warmup: int = 200
    save_stream: bool = False
    save_tasks: bool = False

    def __post_init__(self) -> None:
        check_stream(self.jobs, self.warmup, self.arrival_rate, self.s_max, self.em_max)

    def input_files(self) -> dict[str, Path]:
        return {}

    def _stream_args(self, cluster: Cluster | None, workload: str) -> dict:
        m, c_r = _shape(cluster, workload)
        return {"jobs": self.jobs, "arrival_rate": float(self.arrival_rate), "s_max": self.s_max,
                "em_max": float(self.em_max), "warmup": self.warmup, "machines": m, "slots": c_r}

    def stream_file(self, workload: Workload, cluster: Cluster, path: str | Path) -> Path:
        """Save ``workload`` as a workflow-stream JSON file (the ``save_stream`` artifact)."""
        m, c_r = cluster.slotted_shape("a workflow stream file")
        return write_stream(path, workload.workflows, m, c_r)


@dataclass(frozen=True)
class WorkflowStream(_StreamParams):
    """Generated ``type`` (cybershake | ligo | genome) workflows of ``n`` tasks in an open stream; or,
    with ``size``, of that mean task count (a continuous scale, :func:`sim.workflows.stream.sized_draw`),
    which replaces ``n`` (then left at its default 50)."""

    type: str = "ligo"
    n: int = 50
    size: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.type not in GENERATORS:
            raise InputError(f"workload.type must be one of {', '.join(GENERATORS)}, got {self.type!r}")
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n > MAX_TASKS:
            raise InputError(f"workload.n must be an integer task count ≤ {MAX_TASKS:,}, got {self.n!r}")
        GENERATORS[self.type](np.random.default_rng(0), self.n)  # n too small → InputError
        if self.size is not None:
            if self.n != 50:
                raise InputError(f"workload.size replaces workload.n: set one (n = {self.n}, size = {self.size})")
            size_mix(self.type, self.size)  # a bad size → InputError

    def build(self, rng: np.random.Generator, cluster: Cluster | None) -> Workload:
        return workflow_stream(rng, self.type, n=self.n, size=self.size,
                               **self._stream_args(cluster, f"workload {self.type}"))


@dataclass(frozen=True)
class MapReduceStream(_StreamParams):
    """MapReduce jobs (:mod:`sim.workflows.mapreduce`): discrete uniform ``[lo, hi]`` map and reduce
    counts and whole-second times, in the same open stream as the workflows."""

    arrival_rate: float = 0.01
    s_max: int = 1000  # conf/workload/mapreduce.yaml says why
    maps: tuple[int, int] = (1, 60)
    reduces: tuple[int, int] = (1, 10)
    map_time: tuple[int, int] = (30, 170)
    reduce_time: tuple[int, int] = (110, 250)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.shape  # noqa: B018  (bad bounds → InputError on the driver)

    @property
    def shape(self) -> MapReduceShape:
        return MapReduceShape(self.maps, self.reduces, self.map_time, self.reduce_time)

    def build(self, rng: np.random.Generator, cluster: Cluster | None) -> Workload:
        return mapreduce_stream(rng, self.shape, **self._stream_args(cluster, "workload mapreduce"))


@dataclass(frozen=True)
class WfFormatFolder(_StreamParams):
    """An open stream whose arrivals each draw one WfFormat instance of ``path`` (a folder of
    ``*.json``) uniformly; relative paths are read from ``base_dir``."""

    path: str = "???"
    base_dir: str = "."

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.path or self.path == "???":
            raise InputError("workload.path is required: a folder of WfFormat (WfCommons) instance JSON files")
        if not self.folder.is_dir():
            raise InputError(f"workload.path: WfFormat folder not found: {self.folder}")

    @property
    def folder(self) -> Path:
        return Path(self.base_dir).expanduser() / Path(self.path).expanduser()

    def input_files(self) -> dict[str, Path]:
        """The instance files a run draws from (the folder's ``*.json``, as the reader lists them)."""
        return {f"{self.path.rstrip('/')}/{file.name}": file for file in sorted(self.folder.glob("*.json"))}

    def check_files(self) -> None:
        """Read every instance, as each run does first (a bad one is refused on the driver)."""
        for file in self.input_files().values():
            read_wfformat(file)

    def build(self, rng: np.random.Generator, cluster: Cluster | None) -> Workload:
        return wfformat_stream(rng, self.folder, **self._stream_args(cluster, "workload wfformat"))


@dataclass(frozen=True)
class WorkflowFile(_OneFile):
    """A workflow-stream JSON file (see :mod:`sim.workflows.files`); its m and c_r must be the cluster's."""

    kind = "workflow"  # the metric set and the policies that fit (sim.run)
    stochastic = False  # a replay of a saved stream: every seed gives the same run
    sizes_machine = False

    path: str = "???"
    warmup: int = 0
    base_dir: str = "."
    save_tasks: bool = False

    def __post_init__(self) -> None:
        if not self.path or self.path == "???":
            raise InputError("workload.path is required: a workflow-stream JSON file")
        if not self.file.is_file():
            raise InputError(f"workload.path: workflow-stream file not found: {self.file}")
        if not isinstance(self.warmup, int) or isinstance(self.warmup, bool) or self.warmup < 0:
            raise InputError(f"workload.warmup must be a non-negative integer, got {self.warmup!r}")

    def build(self, rng: np.random.Generator, cluster: Cluster | None) -> Workload:
        m, c_r = _shape(cluster, "workload workflow_file")
        workload, file_m, file_c_r = read_stream(self.file, warmup=self.warmup)
        if (file_m, file_c_r) != (m, c_r):
            raise InputError(f"{self.file}: the stream was drawn for m={file_m}, c_r={file_c_r} but the cluster "
                             f"is m={m}, c_r={c_r}; set cluster.m={file_m} cluster.c_r={file_c_r}")
        return workload
