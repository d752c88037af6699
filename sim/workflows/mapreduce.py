"""MapReduce jobs for the RM-DCWF vs MRCP-RM comparison (seed 002, last table): ``k_mp`` map tasks,
then ``k_rd`` reduce tasks that each wait for every map of the job.

Counts and execution times are discrete uniform (inclusive bounds, whole seconds, so the CP
policy's one-second grid represents them exactly). The defaults (``conf/workload/mapreduce.yaml``)
are calibrated to the paper's two figures on m = 50, c_r = 2: E[work] ≈ 4,000 slot-seconds
(utilisation λ·E[work]/100 ≈ 0.8 at λ = 0.02) and E[SET^R] = E[max map + max reduce] ≈ 383 s (the
turnaround at λ = 0.001, where there is almost no contention). With at most 100 tasks per phase
on 100 slots, SET^R is exactly the critical path.

>>> dag = mapreduce(np.random.default_rng(0))
>>> dag.names[0], all(dag.parents[t] == tuple(range(dag.names.count("map"))) for t in range(len(dag.names))
...                   if dag.names[t] == "reduce")
('map', True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.core import InputError, Workload
from sim.workflows.generators import Dag
from sim.workflows.limits import MAX_SECONDS, MAX_TASKS
from sim.workflows.stream import open_stream


@dataclass(frozen=True, slots=True)
class MapReduceShape:
    """Inclusive ``[lo, hi]`` bounds of the four discrete uniform draws of a job."""

    maps: tuple[int, int] = (1, 60)
    reduces: tuple[int, int] = (1, 10)
    map_time: tuple[int, int] = (30, 170)
    reduce_time: tuple[int, int] = (110, 250)

    def __post_init__(self) -> None:
        for name in ("maps", "reduces", "map_time", "reduce_time"):
            value = getattr(self, name)
            if (not isinstance(value, Sequence) or len(value) != 2
                    or any(not isinstance(v, int) or isinstance(v, bool) for v in value)
                    or not 1 <= value[0] <= value[1]):
                raise InputError(f"workload.{name} must be [lo, hi] with integers 1 ≤ lo ≤ hi, got {value!r}")
            object.__setattr__(self, name, (int(value[0]), int(value[1])))
        if self.maps[1] + self.reduces[1] > MAX_TASKS:
            raise InputError(f"workload.maps and workload.reduces allow {self.maps[1] + self.reduces[1]:,} tasks per "
                             f"job; at most {MAX_TASKS:,} (sim.workflows.limits)")
        for name in ("map_time", "reduce_time"):
            if getattr(self, name)[1] > MAX_SECONDS:
                raise InputError(f"workload.{name} must stay within {MAX_SECONDS:g} s, got {getattr(self, name)!r}")

    def mean_work(self) -> float:
        """E[work] in slot-seconds (the counts and times are independent).

        >>> MapReduceShape().mean_work()
        4040.0
        """
        mean = lambda b: (b[0] + b[1]) / 2  # noqa: E731
        return mean(self.maps) * mean(self.map_time) + mean(self.reduces) * mean(self.reduce_time)


def mapreduce(rng: np.random.Generator, shape: MapReduceShape = MapReduceShape()) -> Dag:
    """One job: counts first, then the map times, then the reduce times (a fixed draw order)."""
    k_mp = int(rng.integers(shape.maps[0], shape.maps[1] + 1))
    k_rd = int(rng.integers(shape.reduces[0], shape.reduces[1] + 1))
    maps = rng.integers(shape.map_time[0], shape.map_time[1] + 1, k_mp)
    reduces = rng.integers(shape.reduce_time[0], shape.reduce_time[1] + 1, k_rd)
    every_map = tuple(range(k_mp))
    return Dag(tuple(float(e) for e in (*maps, *reduces)),
               tuple(() for _ in range(k_mp)) + tuple(every_map for _ in range(k_rd)),
               ("map",) * k_mp + ("reduce",) * k_rd)


def mapreduce_stream(rng: np.random.Generator, shape: MapReduceShape = MapReduceShape(),
                     **stream: object) -> Workload:
    """An open stream of MapReduce jobs (s_j, d_j, common random numbers: :func:`open_stream`);
    ``stream`` are :func:`open_stream`'s keywords."""
    return open_stream(rng, lambda r: mapreduce(r, shape), source="mapreduce", kind="mapreduce",
                       **stream)  # type: ignore[arg-type]
